// Planner benchmark: prints measured figures (docs/benchmarks.md), not a pass/fail
// test. Targets: an 80-layer profile on 1024 GPUs, and the model search (every t, cp, pp, dp,
// v, schedule, ZeRO stage, recomputation, micro batch size) of a Llama-3.1-405B-shaped model on
// 16,384 H100s, each in under 2 s. Exit status 1 when a search takes longer, so a regression is
// visible when it is run by hand.
#include "core/pipeline/model_search.h"
#include "core/pipeline/search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

using namespace shardscope::pipeline;
using Clock = std::chrono::steady_clock;

namespace {

// A 70B-class decoder cut into 80 layers: embedding, 78 blocks (hidden 8192, 64 heads,
// sequence 4096, one sample a microbatch), head. Block activations from Korthikanti et al.
Profile decoder_80()
{
    Profile profile;
    profile.name = "decoder-80";
    profile.shape = ModelShape{.seq_len = 4096, .hidden_size = 8192, .attention_heads = 64};
    profile.micro_batch_size = 1;
    const std::int64_t s = 4096, h = 8192, a = 64;
    const std::int64_t block_act = s * h * 34 + 5 * a * s * s;
    auto layer = [](const char* name, std::int64_t params, double fwd, std::int64_t act) {
        return Layer{.name = name,
                     .params = params,
                     .fwd_ms = fwd,
                     .bwd_ms = 2 * fwd,
                     .bwd_input_ms = fwd,
                     .bwd_weight_ms = fwd,
                     .activation_bytes = act};
    };
    profile.layers.push_back(layer("embed", 1'050'000'000, 0.3, 2 * s * h));
    for (int i = 0; i < 78; ++i)
        profile.layers.push_back(layer("block", 880'000'000, 48.0, block_act));
    profile.layers.push_back(layer("head", 1'050'000'000, 100.0, 4 * s * 128'256));
    return profile;
}

// Best of three: the least disturbed by the other processes on the machine.
double search_ms(const Profile& profile, const SearchSpec& spec, SearchResult& result)
{
    double best = 1e300;
    for (int run = 0; run < 3; ++run) {
        const auto start = Clock::now();
        result = search_plans(profile, spec);
        best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    return best;
}

void print(const char* what, const SearchResult& result, double ms)
{
    std::printf("%s: %zu configurations (%zu fit) in %.1f ms (best of 3; target < 2000 ms)\n", what,
                result.candidates.size(), result.fitting, ms);
    if (result.fitting == 0)
        return;
    const Candidate& c = result.candidates.front();
    std::printf("  best: pp %d x dp %d, %s v=%d, M=%d, ZeRO %d, recompute %s, %s, step %.1f ms, %.1f samples/s, "
                "peak %.1f GiB\n",
                c.pp, c.dp, std::string(to_string(c.schedule)).c_str(), c.virtual_stages, c.microbatches, c.zero,
                std::string(to_string(c.recompute)).c_str(), c.partition.c_str(), c.step_time, c.samples_per_second,
                static_cast<double>(c.peak_memory_bytes) / (1 << 30));
}

// Llama-3.1-405B's shape (its config.json): h 16384, 126 layers, 128 heads, 8 KV heads, FFN
// 53248, vocabulary 128256, untied; seq 8192, 2048 sequences a step, 16,384 H100s of 80 GiB.
double model_search_ms()
{
    const ModelConfig llama{.source = "llama-3.1-405b.json",
                            .hidden_size = 16384,
                            .attention_heads = 128,
                            .kv_heads = 8,
                            .intermediate_size = 53248,
                            .vocab_size = 128256,
                            .layers = 126,
                            .gated_mlp = true,
                            .max_positions = 131072};
    const Cluster h100 = *cluster_preset("h100-sxm-80gb");
    const ModelSearchSpec spec{.gpus = 16384,
                               .global_batch = 2048,
                               .seq_len = 8192,
                               .device_tflops = h100.achieved_tflops(),
                               .peak_tflops = h100.peak_tflops,
                               .gpu_memory_bytes = static_cast<std::int64_t>(h100.hbm_gib * 1073741824.0),
                               .links = {.cluster = h100}};
    double best = 1e300;
    ModelSearchResult result;
    for (int run = 0; run < 3; ++run) {
        const auto start = Clock::now();
        result = search_model_plans(llama, spec);
        best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::printf("model search, Llama-3.1-405B shape, 16384 H100 80 GiB, seq 8192, global batch 2048: %zu "
                "configurations, %zu pruned by memory, %zu by the step-time bound, %zu simulated (%zu fit) in %.1f ms "
                "(best of 3; target < 2000 ms)\n",
                result.space, result.pruned_memory, result.pruned_time, result.search.candidates.size(),
                result.search.fitting, best);
    if (result.search.fitting > 0) {
        const Candidate& c = result.search.candidates.front();
        std::printf("  best: tp %d cp %d pp %d dp %d, %s v=%d, M=%d, b=%d, ZeRO %d, recompute %s, step %.1f ms, "
                    "%.0f TFLOP/s per GPU (MFU %.3f), peak %.1f GiB\n",
                    c.tp, c.cp, c.pp, c.dp, std::string(to_string(c.schedule)).c_str(), c.virtual_stages,
                    c.microbatches, c.micro_batch_size, c.zero, std::string(to_string(c.recompute)).c_str(),
                    c.step_time, c.tflops_per_gpu, c.mfu, static_cast<double>(c.peak_memory_bytes) / (1 << 30));
    }
    return best;
}

} // namespace

int main()
{
    const Profile profile = decoder_80();
    SearchSpec spec{.gpus = 1024,
                    .global_batch = 2048,
                    .micro_batch_size = 1,
                    .gpu_memory_bytes = std::int64_t(80) << 30,
                    .link_gbps = 400.0,
                    .p2p_latency_ms = 0.01}; // every schedule and ZeRO stage, as plan tries by default
    SearchResult result;
    const double ms = search_ms(profile, spec, result);
    print("plan search, 80 layers, 1024 GPUs, global batch 2048, 80 GiB", result, ms);
    // The same with 8x the microbatches per pipeline: the simulations grow, the count does not.
    spec.global_batch = 16384;
    const double large_ms = search_ms(profile, spec, result);
    print("plan search, 80 layers, 1024 GPUs, global batch 16384, 80 GiB", result, large_ms);
    const double model_ms = model_search_ms();
    return ms < 2000.0 && large_ms < 2000.0 && model_ms < 2000.0 ? 0 : 1;
}
