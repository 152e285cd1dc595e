// Counting a rank's health while it is written, and its record in the manifest.

#include "core/checkpoint/health.h"
#include "core/checkpoint/rounding.h"
#include "core/checkpoint/state.h"

#include "core/util/error.h"
#include "core/util/internal/lanes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace shardscope {

StateHealth& StateHealth::operator+=(const StateHealth& o)
{
    nonfinite_param += o.nonfinite_param;
    nonfinite_master += o.nonfinite_master;
    nonfinite_exp_avg += o.nonfinite_exp_avg;
    nonfinite_exp_avg_sq += o.nonfinite_exp_avg_sq;
    negative_exp_avg_sq += o.negative_exp_avg_sq;
    param_master_mismatch += o.param_master_mismatch;
    return *this;
}

namespace {

// The counts run W lanes at a time (util/internal/lanes.h), each lane counting down by one per
// finding (a true compare is -1), folded before it could wrap: a writer counts every value it
// writes, and must cost little next to hashing and writing them (docs/benchmarks.md).
template <std::size_t W>
[[gnu::always_inline]] inline void count_f32(const std::byte* values, std::size_t n, uint64_t& nonfinite,
                                             uint64_t* negative)
{
    using U = typename Lanes<W>::u32;
    using I = typename Lanes<W>::i32;
    std::size_t i = 0;
    while (i + W <= n) {
        I bad{}, below{};
        for (std::size_t end = std::min(n, i + (std::size_t(1) << 30)); i + W <= end; i += W) {
            U bits;
            std::memcpy(&bits, values + 4 * i, sizeof bits);
            const U magnitude = bits & 0x7fffffffu;
            bad += (I)(magnitude >= 0x7f800000u);
            below += (I)(bits > 0x80000000u) & (I)(magnitude <= 0x7f800000u); // < 0: not -0, not NaN
        }
        for (std::size_t lane = 0; lane < W; ++lane) {
            nonfinite += uint64_t(-int64_t(bad[lane]));
            if (negative)
                *negative += uint64_t(-int64_t(below[lane]));
        }
    }
    for (; i < n; ++i) {
        float v;
        std::memcpy(&v, values + 4 * i, 4);
        nonfinite += !std::isfinite(v);
        if (negative)
            *negative += v < 0.0f;
    }
}

// 16-bit parameters whose exponent is all ones (Inf or NaN): `exponent` is that field's mask.
template <std::size_t W>
[[gnu::always_inline]] inline uint64_t count_half_nonfinite(const std::byte* values, std::size_t n, uint32_t exponent)
{
    using U = typename Lanes<W>::u32;
    using I = typename Lanes<W>::i32;
    using H = typename Lanes<W>::u16;
    uint64_t count = 0;
    std::size_t i = 0;
    while (i + W <= n) {
        I bad{};
        for (std::size_t end = std::min(n, i + (std::size_t(1) << 30)); i + W <= end; i += W) {
            H h16;
            std::memcpy(&h16, values + 2 * i, sizeof h16);
            const U h = __builtin_convertvector(h16, U);
            bad += (I)((h & exponent) == exponent);
        }
        for (std::size_t lane = 0; lane < W; ++lane)
            count += uint64_t(-int64_t(bad[lane]));
    }
    for (; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, values + 2 * i, 2);
        count += (h & exponent) == exponent;
    }
    return count;
}

void count_f32_sse2(const std::byte* values, std::size_t n, uint64_t& nonfinite, uint64_t* negative)
{
    count_f32<4>(values, n, nonfinite, negative);
}

uint64_t count_half_nonfinite_sse2(const std::byte* values, std::size_t n, uint32_t exponent)
{
    return count_half_nonfinite<4>(values, n, exponent);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void count_f32_avx2(const std::byte* values, std::size_t n, uint64_t& nonfinite,
                                                uint64_t* negative)
{
    count_f32<8>(values, n, nonfinite, negative);
}

[[gnu::target("avx2,fma")]] uint64_t count_half_nonfinite_avx2(const std::byte* values, std::size_t n,
                                                               uint32_t exponent)
{
    return count_half_nonfinite<8>(values, n, exponent);
}
#endif

void count_floats(const std::byte* values, std::size_t n, uint64_t& nonfinite, uint64_t* negative = nullptr)
{
#if defined(__x86_64__)
    if (has_avx2_fma())
        return count_f32_avx2(values, n, nonfinite, negative);
#endif
    count_f32_sse2(values, n, nonfinite, negative);
}

uint64_t count_halves(const std::byte* values, std::size_t n, ParamDtype dtype)
{
    // An all-ones exponent is Inf or NaN in either 16-bit format.
    const uint32_t exponent = dtype == ParamDtype::F16 ? 0x7c00u : 0x7f80u;
#if defined(__x86_64__)
    if (has_avx2_fma())
        return count_half_nonfinite_avx2(values, n, exponent);
#endif
    return count_half_nonfinite_sse2(values, n, exponent);
}

} // namespace

void count_health(StateVector vector, ParamDtype dtype, const std::byte* values, std::size_t n, const std::byte* param,
                  StateHealth& h)
{
    switch (vector) {
    case StateVector::param: h.nonfinite_param += count_halves(values, n, dtype); break;
    case StateVector::master:
        // The pair is counted with the master, which comes after the parameters in a shard file.
        h.param_master_mismatch += count_unrounded(dtype, param, values, n, &h.nonfinite_master);
        break;
    case StateVector::exp_avg: count_floats(values, n, h.nonfinite_exp_avg); break;
    case StateVector::exp_avg_sq: count_floats(values, n, h.nonfinite_exp_avg_sq, &h.negative_exp_avg_sq); break;
    }
}

void count_health(StateVector vector, const RankStateView& s, std::size_t begin, std::size_t n, StateHealth& h)
{
    const auto* param = reinterpret_cast<const std::byte*>(s.param.data() + begin);
    const std::byte* values = param;
    switch (vector) {
    case StateVector::param: break;
    case StateVector::master: values = reinterpret_cast<const std::byte*>(s.master.data() + begin); break;
    case StateVector::exp_avg: values = reinterpret_cast<const std::byte*>(s.exp_avg.data() + begin); break;
    case StateVector::exp_avg_sq: values = reinterpret_cast<const std::byte*>(s.exp_avg_sq.data() + begin); break;
    }
    count_health(vector, s.dtype, values, n, param, h);
}

StateHealth scan_health(const RankStateView& s)
{
    StateHealth h;
    for (const StateVector v : {StateVector::param, StateVector::master, StateVector::exp_avg, StateVector::exp_avg_sq})
        count_health(v, s, 0, s.numel(), h);
    return h;
}

std::string describe(const StateHealth& h)
{
    std::string text;
    auto add = [&](uint64_t n, const char* what) {
        if (n)
            text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    add(h.nonfinite_param, "non-finite param values");
    add(h.nonfinite_master, "non-finite master values");
    add(h.nonfinite_exp_avg, "non-finite exp_avg values");
    add(h.nonfinite_exp_avg_sq, "non-finite exp_avg_sq values");
    add(h.negative_exp_avg_sq, "negative exp_avg_sq values");
    add(h.param_master_mismatch, "params that are not their master weight rounded");
    return text.empty() ? "healthy" : text;
}

void add_rank_findings(std::string& text, int rank, const StateHealth& health)
{
    if (!health.healthy())
        text += (text.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + ": ") + describe(health);
}

nlohmann::ordered_json health_json(const StateHealth& h)
{
    nlohmann::ordered_json j;
    j["nonfinite"] = {{"param", h.nonfinite_param},
                      {"master", h.nonfinite_master},
                      {"exp_avg", h.nonfinite_exp_avg},
                      {"exp_avg_sq", h.nonfinite_exp_avg_sq}};
    j["negative_exp_avg_sq"] = h.negative_exp_avg_sq;
    j["param_master_mismatch"] = h.param_master_mismatch;
    return j;
}

StateHealth parse_health(const nlohmann::json& value, const std::string& where, int rank)
{
    const auto fail = [&](const std::string& what) -> uint64_t {
        throw Error(ProblemKind::invalid_manifest, where + ": rank " + std::to_string(rank) + ": health: " + what,
                    where, rank);
    };
    const auto count = [&](const nlohmann::json& object, const char* key) -> uint64_t {
        if (!object.contains(key) || !object[key].is_number_unsigned())
            return fail(std::string("'") + key + "' must be a non-negative integer");
        return object[key].get<uint64_t>();
    };
    if (!value.is_object() || !value.contains("nonfinite") || !value["nonfinite"].is_object())
        fail("must be an object with a 'nonfinite' object");
    const nlohmann::json& nonfinite = value["nonfinite"];
    return {.nonfinite_param = count(nonfinite, "param"),
            .nonfinite_master = count(nonfinite, "master"),
            .nonfinite_exp_avg = count(nonfinite, "exp_avg"),
            .nonfinite_exp_avg_sq = count(nonfinite, "exp_avg_sq"),
            .negative_exp_avg_sq = count(value, "negative_exp_avg_sq"),
            .param_master_mismatch = count(value, "param_master_mismatch")};
}

} // namespace shardscope
