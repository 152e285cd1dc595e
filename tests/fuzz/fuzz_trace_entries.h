#pragma once
// Fuzzing entry for the issue-16 profile readers (see fuzz_entries.h for the contract): the
// PyTorch profiler trace (SAX pass) and the Hugging Face config.json reader. The first byte picks
// the reader (even: trace, odd: config.json), the rest is the text.

#include "core/pipeline/profile_model.h"
#include "core/pipeline/profile_trace.h"
#include "fuzz_entries.h"

#include <cmath>

namespace shardscope::fuzz {

inline void trace_one(const uint8_t* data, std::size_t size)
{
    if (size == 0)
        return;
    const std::string_view text = as_text(data + 1, size - 1);
    try {
        if (data[0] & 1) {
            const pipeline::ModelConfig c = pipeline::parse_model_config(text, "config.json");
            require(c.hidden_size > 0 && c.attention_heads > 0 && c.vocab_size > 0 && c.layers > 0 &&
                        c.intermediate_size > 0,
                    "an accepted config has every dimension > 0");
            require(c.kv_heads >= 1 && c.kv_heads <= c.attention_heads, "1 <= kv heads <= heads");
            return;
        }
        const pipeline::TraceProfile t = pipeline::parse_profiler_trace(text, "trace.json");
        require(!t.profile.layers.empty(), "an accepted trace has layers");
        require(t.ranges.size() == t.profile.layers.size(), "one range count per layer");
        for (const pipeline::Layer& l : t.profile.layers)
            require(std::isfinite(l.fwd_ms) && l.fwd_ms >= 0 && std::isfinite(l.bwd_ms) && l.bwd_ms >= 0,
                    "finite, non-negative times");
        pipeline::validate_profile(t.profile);
    } catch (const Error& e) {
        require(std::string_view(e.what()).size() <= kMaxMessageBytes, "bounded error message");
    }
}

} // namespace shardscope::fuzz
