#pragma once
// Asking about problems in tests: a report's, and the one a call throws.

#include "core/checkpoint/verify.h"

#include <optional>
#include <string>

namespace problemcheck {

inline bool has_problem(const shardscope::VerifyReport& r, shardscope::ProblemKind kind)
{
    for (const auto& p : r.problems)
        if (p.kind == kind)
            return true;
    return false;
}

// Every problem on its own line, for failure messages.
inline std::string problems_text(const shardscope::VerifyReport& r)
{
    std::string out;
    for (const auto& p : r.problems)
        out += std::string(shardscope::to_string(p.kind)) + ": " + p.message + "\n";
    return out;
}

// The problem of the Error `function` throws, or nullopt when it returns.
template <typename Function>
std::optional<shardscope::Problem> error_of(Function&& function)
{
    try {
        function();
    } catch (const shardscope::Error& error) {
        return error.problem();
    }
    return std::nullopt;
}

} // namespace problemcheck
