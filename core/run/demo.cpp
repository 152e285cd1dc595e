#include "core/run/demo.h"

#include <cmath>

namespace shardscope {

namespace {

uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Uniform in [-1, 1) from (seed, element, stream): 24 random bits, exactly representable.
float unit(uint64_t seed, uint64_t index, uint64_t stream)
{
    const uint64_t bits = splitmix64(splitmix64(seed * 4 + stream) ^ index);
    return static_cast<float>(static_cast<int64_t>(bits >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

} // namespace

RankState make_demo_rank(uint64_t seed, uint64_t numel_total, int world_size, int rank, ParamDtype dtype)
{
    RankState s;
    s.rank = rank;
    s.dtype = dtype;
    s.param_shard_offset = even_shard_offset(numel_total, world_size, rank);
    const uint64_t end = even_shard_offset(numel_total, world_size, rank + 1);
    const auto n = static_cast<std::size_t>(end - s.param_shard_offset);
    s.param.resize(n);
    s.master.resize(n);
    s.exp_avg.resize(n);
    s.exp_avg_sq.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const uint64_t g = s.param_shard_offset + i; // the global index decides every value
        // Magnitudes like a trained model's: weights ~0.02, first moments ~1e-4, second ~1e-8.
        s.master[i] = 0.02f * unit(seed, g, 0);
        s.param[i] = float_to_param(s.master[i], dtype);
        s.exp_avg[i] = 1e-4f * unit(seed, g, 1);
        s.exp_avg_sq[i] = 1e-8f * std::fabs(unit(seed, g, 2));
    }
    return s;
}

std::vector<RankState> make_demo_state(uint64_t seed, uint64_t numel_total, int world_size, ParamDtype dtype)
{
    std::vector<RankState> states;
    states.reserve(static_cast<std::size_t>(world_size));
    for (int r = 0; r < world_size; ++r)
        states.push_back(make_demo_rank(seed, numel_total, world_size, r, dtype));
    return states;
}

std::vector<TensorInfo> demo_tensor_layout(uint64_t total)
{
    // A toy decoder: embedding 1/8, four blocks of attention + MLP, final norm, head 1/8.
    std::vector<TensorInfo> tensors;
    uint64_t at = 0;
    auto add = [&](std::string name, uint64_t numel) {
        numel = std::min(numel, total - at);
        tensors.push_back({std::move(name), {numel}, at, numel});
        at += numel;
    };
    add("embed.weight", total / 8);
    const uint64_t block = (total - 2 * (total / 8)) / 4;
    for (int b = 0; b < 4; ++b) {
        const std::string prefix = "blocks." + std::to_string(b) + ".";
        add(prefix + "attn.qkv.weight", block * 3 / 8);
        add(prefix + "attn.out.weight", block / 8);
        add(prefix + "mlp.up.weight", block / 4);
        add(prefix + "mlp.down.weight", block - block * 3 / 8 - block / 8 - block / 4);
    }
    add("head.weight", total - at);
    std::erase_if(tensors, [](const TensorInfo& t) { return t.numel == 0; });
    return tensors;
}

CheckpointMeta demo_checkpoint_meta(int world_size, uint64_t step, uint64_t seed, ParamDtype dtype,
                                    uint64_t numel_total)
{
    CheckpointMeta meta;
    meta.world_size = world_size;
    meta.step = step;
    meta.wall_clock_seconds = static_cast<double>(step) * 3.66; // a plausible 3.66 s per step
    meta.param_dtype = dtype;
    meta.param_numel_total = numel_total;
    meta.tensors = demo_tensor_layout(numel_total);
    meta.training_state = {
        {"optimizer",
         {{"name", "adamw"},
          {"lr", 3e-4},
          {"betas", {0.9, 0.95}},
          {"eps", 1e-8},
          {"weight_decay", 0.1},
          {"step", step}}},
        {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 2000}, {"max_steps", 100000}, {"min_lr", 3e-5}}},
        {"dataloader", {{"epoch", step / 5000}, {"offset", (step % 5000) * 512}, {"shuffle_seed", seed}}},
        {"rng", {{"seed", seed}, {"counter", step}}}};
    return meta;
}

} // namespace shardscope
