#pragma once
// The training state one rank owns, as it is saved, loaded and resharded.

#include "core/checkpoint/manifest.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace shardscope {

// The four vectors of a rank's state, by the names they have in a shard file.
enum class StateVector { param, master, exp_avg, exp_avg_sq };
inline std::optional<StateVector> state_vector_from_string(std::string_view name)
{
    if (name == "param")
        return StateVector::param;
    if (name == "master")
        return StateVector::master;
    if (name == "exp_avg")
        return StateVector::exp_avg;
    if (name == "exp_avg_sq")
        return StateVector::exp_avg_sq;
    return std::nullopt;
}

// One rank's slice of the training state: fp16/bf16 parameters (raw bits) and the ZeRO optimizer
// state of the same slice. All four vectors have param_shard_numel elements.
struct RankState {
    int rank = 0;
    ParamDtype dtype = ParamDtype::F16;
    uint64_t param_shard_offset = 0;
    std::vector<uint16_t> param;
    std::vector<float> master;
    std::vector<float> exp_avg;
    std::vector<float> exp_avg_sq;

    uint64_t numel() const { return param.size(); }
    bool operator==(const RankState&) const = default;
};

// The same slice viewed where it already lies, which is all a writer needs: the Python module
// saves straight from numpy (or torch) buffers without first copying gigabytes into a RankState.
// Valid only as long as the memory it views.
struct RankStateView {
    int rank = 0;
    ParamDtype dtype = ParamDtype::F16;
    uint64_t param_shard_offset = 0;
    std::span<const uint16_t> param;
    std::span<const float> master;
    std::span<const float> exp_avg;
    std::span<const float> exp_avg_sq;

    uint64_t numel() const { return param.size(); }
};

inline RankStateView view_of(const RankState& s)
{
    return {.rank = s.rank,
            .dtype = s.dtype,
            .param_shard_offset = s.param_shard_offset,
            .param = s.param,
            .master = s.master,
            .exp_avg = s.exp_avg,
            .exp_avg_sq = s.exp_avg_sq};
}

inline std::vector<RankStateView> views_of(const std::vector<RankState>& states)
{
    std::vector<RankStateView> views;
    views.reserve(states.size());
    for (const RankState& s : states)
        views.push_back(view_of(s));
    return views;
}

// What a rank's values say about its health (health.h): counted by write_rank_shard into the
// shard's record, and by a loader over what it loaded.
StateHealth scan_health(const RankStateView& state);
// The same for elements [begin, begin + count) of one vector, added to `health`: what a writer
// counts piece by piece as the piece goes out. The parameter/master check runs with `master`.
void count_health(StateVector vector, const RankStateView& state, std::size_t begin, std::size_t count,
                  StateHealth& health);
// The same over raw little-endian bytes of `count` elements of one vector, as they stream past a
// writer that holds no RankState (reshard); `param` is needed, the same elements', with `master`.
void count_health(StateVector vector, ParamDtype dtype, const std::byte* values, std::size_t count,
                  const std::byte* param, StateHealth& health);
inline StateHealth scan_health(const RankState& state)
{
    return scan_health(view_of(state));
}

// Called from worker threads: implementations must be thread-safe and quick.
using ProgressFn = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

} // namespace shardscope
