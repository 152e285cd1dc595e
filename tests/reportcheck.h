#pragma once
// Asking a verification report about its problems, for the tests of every format.

#include "core/checkpoint.h"

#include <string>

namespace reportcheck {

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

} // namespace reportcheck
