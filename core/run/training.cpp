#include "core/run/training.h"

#include "core/run/demo.h"

#include "core/util/printable.h"

#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <set>

namespace shardscope {

namespace {

uint64_t splitmix64(uint64_t& x)
{
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t x = a * 0x9e3779b97f4a7c15ull ^ b;
    uint64_t h = splitmix64(x);
    x = h ^ c;
    return splitmix64(x);
}

// Feature j of sample s: uniform in [-1, 1), a pure function so no rank stores the dataset.
float feature(uint64_t seed, uint64_t sample, uint64_t j)
{
    return static_cast<float>(static_cast<int64_t>(hash3(seed, sample, j) >> 40) - (1 << 23)) /
        static_cast<float>(1 << 23);
}

// The teacher the model learns: y = sum_j teacher(j) x_j + noise.
float teacher(uint64_t seed, uint64_t j)
{
    return 0.5f * feature(seed ^ 0x7eac4e5ull, 0, j);
}

uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

constexpr double kFixedScale = 4294967296.0; // 2^32: gradients in 32.32 fixed point

std::vector<uint32_t> shuffled_order(uint64_t size, uint64_t seed, uint64_t epoch)
{
    std::vector<uint32_t> order(size);
    for (uint64_t i = 0; i < size; ++i)
        order[i] = static_cast<uint32_t>(i);
    uint64_t state = seed * 1000003ull + epoch;
    for (uint64_t i = size - 1; i > 0; --i) // Fisher-Yates
        std::swap(order[i], order[splitmix64(state) % (i + 1)]);
    return order;
}

} // namespace

Trainer::Trainer(const TrainConfig& config) : m_config(config)
{
    if (config.world_size < 1 || config.numel == 0 || config.batch_size < 1 || config.dataset_size == 0 ||
        config.dataset_size > (1ull << 31))
        throw Error(ProblemKind::invalid_argument,
                    "training needs world_size >= 1, numel >= 1, batch >= 1 and 1..2^31 samples");
    // Initial weights: the demo state (small random master weights, zero-ish moments replaced by 0).
    if (config.local_rank >= config.world_size)
        throw Error(ProblemKind::invalid_argument, "training: local_rank must be below world_size");
    if (config.local_rank >= 0)
        m_ranks = {make_demo_rank(config.seed, config.numel, config.world_size, config.local_rank, config.dtype)};
    else
        m_ranks = make_demo_state(config.seed, config.numel, config.world_size, config.dtype);
    for (auto& r : m_ranks) {
        std::fill(r.exp_avg.begin(), r.exp_avg.end(), 0.0f);
        std::fill(r.exp_avg_sq.begin(), r.exp_avg_sq.end(), 0.0f);
    }
    uint64_t s = config.seed ^ 0x5eedull;
    for (auto& word : m_rng)
        word = splitmix64(s);
    m_order = shuffled_order(config.dataset_size, config.seed, 0);
}

namespace {

// What training_state() writes, section by section: everything resume restores or checks.
const std::map<std::string, std::set<std::string>> kStateItems = {
    {"optimizer", {"name", "step", "lr", "betas", "eps", "weight_decay"}},
    {"lr_schedule", {"name", "base_lr", "min_lr", "warmup_steps", "total_steps"}},
    {"dataloader", {"epoch", "offset", "shuffle_seed", "batch_size"}},
    {"rng", {"algorithm", "xoshiro256"}},
    {"trainer", {"seed", "batch_size", "dataset_size", "last_loss"}},
};

// The checkpoint's items a resume would not restore: unknown training_state entries, manifest
// fields nobody reads, tensors the load passed over.
std::vector<std::string> unrestored_items(const LoadedCheckpoint& checkpoint)
{
    std::vector<std::string> items = checkpoint.unread;
    for (const auto& [section, value] : checkpoint.manifest.training_state.items()) {
        const auto known = kStateItems.find(section);
        if (known == kStateItems.end()) {
            items.push_back("training_state." + section);
            continue;
        }
        if (value.is_object())
            for (const auto& [key, ignored] : value.items())
                if (!known->second.count(key))
                    items.push_back("training_state." + section + "." + key);
    }
    if (checkpoint.manifest.extra.is_object())
        for (const auto& [key, ignored] : checkpoint.manifest.extra.items())
            items.push_back("manifest field '" + key + "'");
    return items;
}

} // namespace

Trainer Trainer::resume(const TrainConfig& config, LoadedCheckpoint checkpoint, std::vector<std::string>* unread)
{
    const nlohmann::json& ts = checkpoint.manifest.training_state;
    const std::string where = (checkpoint.dir / "manifest.json").string();
    auto bad = [&](const std::string& what) {
        return Error(ProblemKind::invalid_argument, where + ": cannot resume: " + what, where);
    };
    if (!ts.is_object() || !ts.contains("trainer"))
        throw bad("training_state has no 'trainer' section (not written by shardctl train)");
    Trainer t(config);
    try {
        const auto& tr = ts.at("trainer");
        if (tr.at("seed").get<uint64_t>() != config.seed)
            throw bad("it was trained with --seed " + tr.at("seed").dump() + ", not " + std::to_string(config.seed));
        if (checkpoint.manifest.param_numel_total != config.numel)
            throw bad("it has " + std::to_string(checkpoint.manifest.param_numel_total) + " parameters, not --numel " +
                      std::to_string(config.numel));
        if (checkpoint.manifest.param_dtype != config.dtype)
            throw bad("its parameters are " + std::string(to_string(checkpoint.manifest.param_dtype)));
        if (tr.at("batch_size").get<int>() != config.batch_size ||
            tr.at("dataset_size").get<uint64_t>() != config.dataset_size)
            throw bad("batch or dataset size differ from this run's");
        const auto& optimizer = ts.at("optimizer");
        if (optimizer.at("name").get<std::string>() != "adamw" ||
            optimizer.at("betas").at(0).get<double>() != config.beta1 ||
            optimizer.at("betas").at(1).get<double>() != config.beta2 ||
            optimizer.at("eps").get<double>() != config.eps ||
            optimizer.at("weight_decay").get<double>() != config.weight_decay)
            throw bad("its optimizer (" + optimizer.dump() + ") differs from this run's");
        const auto& loader = ts.at("dataloader");
        if (loader.at("shuffle_seed").get<uint64_t>() != config.seed ||
            loader.at("batch_size").get<int>() != config.batch_size)
            throw bad("its dataloader (" + loader.dump() + ") differs from this run's");
        if (ts.at("rng").at("algorithm").get<std::string>() != "xoshiro256**")
            throw bad("its random number generator is " + ts.at("rng").at("algorithm").dump());
        const auto& schedule = ts.at("lr_schedule");
        if (schedule.at("name").get<std::string>() != "warmup_cosine" ||
            schedule.at("total_steps").get<uint64_t>() != config.total_steps ||
            schedule.at("warmup_steps").get<uint64_t>() != config.warmup_steps ||
            schedule.at("base_lr").get<double>() != config.lr || schedule.at("min_lr").get<double>() != config.min_lr)
            throw bad("its learning-rate schedule (" + schedule.dump() + ") differs from this run's");
        t.m_step = optimizer.at("step").get<uint64_t>();
        if (t.learning_rate(t.m_step) != optimizer.at("lr").get<double>())
            throw bad("its optimizer's lr " + optimizer.at("lr").dump() + " is not its schedule's at step " +
                      std::to_string(t.m_step));
        t.m_epoch = ts.at("dataloader").at("epoch").get<uint64_t>();
        t.m_offset = ts.at("dataloader").at("offset").get<uint64_t>();
        const auto& rng = ts.at("rng").at("xoshiro256");
        for (std::size_t i = 0; i < 4; ++i)
            t.m_rng[i] = std::stoull(rng.at(i).get<std::string>(), nullptr, 16);
        // A diverged run's NaN loss is saved as null (JSON has no NaN).
        t.m_last_loss =
            tr.at("last_loss").is_null() ? std::numeric_limits<double>::quiet_NaN() : tr.at("last_loss").get<double>();
    } catch (const nlohmann::json::exception& e) {
        throw bad(std::string("training_state is malformed: ") + e.what());
    }
    if (t.m_offset >= config.dataset_size)
        throw bad("dataloader offset is past the end of the epoch");
    if (std::vector<std::string> items = unrestored_items(checkpoint); !items.empty()) {
        if (!unread) {
            std::string names;
            for (const auto& item : items)
                names += (names.empty() ? "" : ", ") + item;
            throw Error(ProblemKind::unread_state,
                        where + ": cannot resume without dropping state this trainer does not restore: " +
                            printable(names, 2000) + " (--allow-partial-state goes on without it)",
                        where);
        }
        unread->insert(unread->end(), items.begin(), items.end());
    }
    t.m_order = shuffled_order(config.dataset_size, config.seed, t.m_epoch);
    if (config.local_rank >= 0) { // the caller passes only this process's slice
        if (checkpoint.ranks.size() != 1 || checkpoint.ranks[0].rank != config.local_rank)
            throw bad("a process-local trainer needs exactly its own rank's slice");
    } else if (checkpoint.ranks.size() != static_cast<std::size_t>(config.world_size)) {
        throw bad("it has " + std::to_string(checkpoint.ranks.size()) + " ranks, not " +
                  std::to_string(config.world_size));
    }
    t.m_ranks = std::move(checkpoint.ranks);
    return t;
}

nlohmann::json Trainer::training_state() const
{
    auto hex = [](uint64_t v) {
        char text[17];
        std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
        return std::string(text);
    };
    const TrainConfig& c = m_config;
    return {
        {"optimizer",
         {{"name", "adamw"},
          {"step", m_step},
          {"lr", learning_rate(m_step)},
          {"betas", {c.beta1, c.beta2}},
          {"eps", c.eps},
          {"weight_decay", c.weight_decay}}},
        {"lr_schedule",
         {{"name", "warmup_cosine"},
          {"base_lr", c.lr},
          {"min_lr", c.min_lr},
          {"warmup_steps", c.warmup_steps},
          {"total_steps", c.total_steps}}},
        {"dataloader",
         {{"epoch", m_epoch}, {"offset", m_offset}, {"shuffle_seed", c.seed}, {"batch_size", c.batch_size}}},
        {"rng",
         {{"algorithm", "xoshiro256**"}, {"xoshiro256", {hex(m_rng[0]), hex(m_rng[1]), hex(m_rng[2]), hex(m_rng[3])}}}},
        {"trainer",
         {{"seed", c.seed},
          {"batch_size", c.batch_size},
          {"dataset_size", c.dataset_size},
          {"last_loss", m_last_loss}}}};
}

double Trainer::learning_rate(uint64_t step) const
{
    const TrainConfig& c = m_config;
    if (step < c.warmup_steps)
        return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
    const double progress = std::min(1.0,
                                     static_cast<double>(step - c.warmup_steps) /
                                         static_cast<double>(std::max<uint64_t>(1, c.total_steps - c.warmup_steps)));
    return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

uint64_t Trainer::next_sample()
{
    if (m_offset == m_config.dataset_size) { // epoch boundary: a new shuffled order
        ++m_epoch;
        m_offset = 0;
        m_order = shuffled_order(m_config.dataset_size, m_config.seed, m_epoch);
    }
    return m_order[m_offset++];
}

double Trainer::next_noise()
{
    // xoshiro256**, so the noise depends on a state that must be checkpointed to resume exactly.
    const uint64_t result = rotl(m_rng[1] * 5, 7) * 9;
    const uint64_t t = m_rng[1] << 17;
    m_rng[2] ^= m_rng[0];
    m_rng[3] ^= m_rng[1];
    m_rng[1] ^= m_rng[2];
    m_rng[0] ^= m_rng[3];
    m_rng[2] ^= t;
    m_rng[3] = rotl(m_rng[3], 45);
    return (static_cast<double>(result >> 11) / 9007199254740992.0 - 0.5) * 0.02;
}

double Trainer::step()
{
    const TrainConfig& c = m_config;
    const auto batch = static_cast<std::size_t>(c.batch_size);
    std::vector<uint64_t> samples(batch);
    std::vector<double> noise(batch);
    for (std::size_t i = 0; i < batch; ++i) {
        samples[i] = next_sample();
        noise[i] = next_noise();
    }

    // Forward with the low-precision parameters, as mixed-precision training does. Every product
    // is rounded to fixed point on its own, so sums are exact integers whatever the slicing.
    std::vector<int64_t> prediction_fixed(batch, 0);
    std::vector<int64_t> target_fixed(batch, 0);
    auto fixed = [](double value) { return static_cast<int64_t>(std::nearbyint(value * kFixedScale)); };
    bool diverged = false;
    for (const RankState& r : m_ranks) {
        for (std::size_t k = 0; k < r.param.size(); ++k) {
            const uint64_t j = r.param_shard_offset + k;
            const double p = r.dtype == ParamDtype::F16 ? f16_to_float(r.param[k]) : bf16_to_float(r.param[k]);
            if (!std::isfinite(p)) { // no fixed-point value: the loss is NaN, the other terms go on
                diverged = true;
                continue;
            }
            const double w = teacher(c.seed, j);
            for (std::size_t i = 0; i < batch; ++i) {
                const double x = feature(c.seed, samples[i], j);
                prediction_fixed[i] += fixed(p * x);
                target_fixed[i] += fixed(w * x);
            }
        }
    }
    if (c.allreduce_sum) { // the other processes' slices contribute their partial sums
        std::vector<int64_t> sums(prediction_fixed);
        sums.insert(sums.end(), target_fixed.begin(), target_fixed.end());
        c.allreduce_sum(sums);
        std::copy(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(batch), prediction_fixed.begin());
        std::copy(sums.begin() + static_cast<std::ptrdiff_t>(batch), sums.end(), target_fixed.begin());
    }
    std::vector<double> error(batch);
    double loss = 0;
    for (std::size_t i = 0; i < batch; ++i) {
        error[i] = static_cast<double>(prediction_fixed[i] - target_fixed[i]) / kFixedScale - noise[i];
        loss += 0.5 * error[i] * error[i];
    }
    loss /= static_cast<double>(batch);
    if (diverged)
        loss = std::numeric_limits<double>::quiet_NaN();

    // Backward + AdamW on each rank's ZeRO slice: every rank updates only what it owns.
    ++m_step;
    const double lr = learning_rate(m_step - 1);
    const double bias1 = 1 - std::pow(c.beta1, static_cast<double>(m_step));
    const double bias2 = 1 - std::pow(c.beta2, static_cast<double>(m_step));
    for (RankState& r : m_ranks) {
        for (std::size_t k = 0; k < r.param.size(); ++k) {
            const uint64_t j = r.param_shard_offset + k;
            int64_t grad_fixed = 0;
            for (std::size_t i = 0; i < batch; ++i)
                grad_fixed += fixed(error[i] * feature(c.seed, samples[i], j));
            const double g = static_cast<double>(grad_fixed) / kFixedScale / static_cast<double>(batch);
            const double m = c.beta1 * r.exp_avg[k] + (1 - c.beta1) * g;
            const double v = c.beta2 * r.exp_avg_sq[k] + (1 - c.beta2) * g * g;
            r.exp_avg[k] = static_cast<float>(m);
            r.exp_avg_sq[k] = static_cast<float>(v);
            const double update = (m / bias1) / (std::sqrt(v / bias2) + c.eps) + c.weight_decay * r.master[k];
            r.master[k] = static_cast<float>(r.master[k] - lr * update);
            r.param[k] = float_to_param(r.master[k], r.dtype);
        }
    }
    m_last_loss = loss;
    return loss;
}

void Trainer::plant_nan(StateVector which)
{
    for (RankState& r : m_ranks) {
        if (r.param.empty())
            continue;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        switch (which) {
        case StateVector::param: r.param[0] = float_to_param(nan, r.dtype); break;
        case StateVector::master: r.master[0] = nan; break;
        case StateVector::exp_avg: r.exp_avg[0] = nan; break;
        case StateVector::exp_avg_sq: r.exp_avg_sq[0] = nan; break;
        }
        return;
    }
}

} // namespace shardscope
