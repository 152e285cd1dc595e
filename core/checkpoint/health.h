#pragma once
// The health a writer records for each rank it saves (docs/format.md, "Health"): counted from the
// values it is writing, in the same thread, so a step says inside its own atomic commit whether
// it is fit to resume from. Retention keeps the newest healthy step and resume goes to it
// (core/run/lifecycle.h); readers never have to scan values to find it.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace shardscope {

struct StateHealth {
    // NaN or +-Inf, per state vector.
    uint64_t nonfinite_param = 0;
    uint64_t nonfinite_master = 0;
    uint64_t nonfinite_exp_avg = 0;
    uint64_t nonfinite_exp_avg_sq = 0;
    // Adam's second moment is a running mean of squares: a negative one is corruption.
    uint64_t negative_exp_avg_sq = 0;
    // Parameters that are not their fp32 master weight rounded to nearest even in the parameter
    // dtype (float_to_param; the stats' check is the same rule), NaN masters not counted: param
    // and master were not saved from the same optimizer step.
    uint64_t param_master_mismatch = 0;

    bool healthy() const
    {
        return nonfinite_param + nonfinite_master + nonfinite_exp_avg + nonfinite_exp_avg_sq + negative_exp_avg_sq +
            param_master_mismatch ==
            0;
    }
    StateHealth& operator+=(const StateHealth& other);
    bool operator==(const StateHealth&) const = default;
};

// "3 non-finite values in exp_avg_sq, 2 negative exp_avg_sq values"; "healthy" when there is nothing.
std::string describe(const StateHealth& health);
// Adds "rank 3: <describe>" to `text` ("; " between ranks) when the rank is not healthy: the one
// wording of a step's findings, from its record or from loaded values.
void add_rank_findings(std::string& text, int rank, const StateHealth& health);

// {"nonfinite": {"param", "master", "exp_avg", "exp_avg_sq"}, "negative_exp_avg_sq",
// "param_master_mismatch"}: a shard record's "health" (docs/format.md).
nlohmann::ordered_json health_json(const StateHealth& health);
// The inverse; throws Error(invalid_manifest) naming `where` and the field when it is malformed.
StateHealth parse_health(const nlohmann::json& value, const std::string& where, int rank);

} // namespace shardscope
