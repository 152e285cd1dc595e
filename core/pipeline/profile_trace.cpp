// PyTorch profiler traces as layer profiles (profile_trace.h), and the layer-name rules the
// checkpoint grouping (core/inspect/layer_profile.cpp) shares.

#include "core/pipeline/profile_trace.h"

#include "core/pipeline/profile_model.h"

#include "core/util/error.h"
#include "core/util/printable.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace shardscope::pipeline {

namespace {

constexpr std::array<std::string_view, 5> kContainers = {"layers", "h", "blocks", "block", "layer"};
constexpr std::array<std::string_view, 11> kEmbeddings = {
    "embed_tokens", "embed_in",       "embed",           "embeddings",          "embedding",      "wte",
    "wpe",          "tok_embeddings", "word_embeddings", "position_embeddings", "embed_positions"};
constexpr std::array<std::string_view, 10> kHeads = {"norm", "ln_f",         "final_layernorm", "final_norm", "lm_head",
                                                     "head", "output_layer", "output",          "embed_out",  "score"};

std::vector<std::string_view> components(std::string_view name)
{
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (start <= name.size()) {
        const std::size_t dot = name.find('.', start);
        const std::size_t end = dot == std::string_view::npos ? name.size() : dot;
        parts.push_back(name.substr(start, end - start));
        if (dot == std::string_view::npos)
            break;
        start = dot + 1;
    }
    return parts;
}

bool all_digits(std::string_view text)
{
    return !text.empty() && text.size() <= 9 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

template <std::size_t N>
bool any_component_in(std::string_view name, const std::array<std::string_view, N>& names)
{
    for (std::string_view part : components(name))
        if (std::find(names.begin(), names.end(), part) != names.end())
            return true;
    return false;
}

[[noreturn]] void trace_fail(const std::string& origin, const std::string& what)
{
    throw Error(ProblemKind::invalid_argument, "trace " + origin + " " + what, origin);
}

// One complete event as the SAX pass keeps it.
struct Range {
    std::string name;
    std::string cat;
    std::string thread; // pid and tid: nesting is per thread
    double ts = 0, dur = 0;
    std::size_t order = 0; // position in the file
};

// Keeps the complete events a profile can use: layer-named ranges, their backwards, and the
// ProfilerStep markers. Everything else (kernels, ops, args) is read and dropped.
class TraceCollector : public nlohmann::json_sax<nlohmann::json> {
public:
    std::vector<Range> ranges;
    std::map<std::string, int> step_names;
    bool top_object = false, top_array = false, saw_events = false;
    std::string violation;
    std::size_t error_byte = 0;
    bool syntax_error = false;
    std::uint64_t events = 0;

    // Values outside an event's own fields (kernels' args, metadata) are most of a trace: they
    // are dropped before anything is converted or copied.
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t v) override
    {
        return !wanted() || scalar(std::to_string(v), static_cast<double>(v));
    }
    bool number_unsigned(number_unsigned_t v) override
    {
        return !wanted() || scalar(std::to_string(v), static_cast<double>(v));
    }
    bool number_float(number_float_t v, const string_t& text) override { return !wanted() || scalar(text, v); }
    bool string(string_t& v) override { return !wanted() || scalar(v, std::nullopt); }
    bool binary(binary_t&) override { return true; }
    bool key(string_t& k) override
    {
        if (m_depth == 1 && top_object)
            m_top_key = k;
        if (m_in_event && m_depth == m_events_depth + 1) {
            m_field = k == "name" ? Field::name
                : k == "cat"      ? Field::cat
                : k == "ph"       ? Field::ph
                : k == "pid"      ? Field::pid
                : k == "tid"      ? Field::tid
                : k == "ts"       ? Field::ts
                : k == "dur"      ? Field::dur
                                  : Field::none;
        }
        return true;
    }
    bool start_object(std::size_t) override
    {
        if (++m_depth > 64)
            return fail("is nested more than 64 levels deep (the limit)");
        if (m_depth == 1)
            top_object = true;
        if (m_events_depth && m_depth == m_events_depth + 1) {
            m_in_event = true;
            m_field = Field::none;
            m_event = {};
            m_ph.clear();
            m_pid.clear();
            m_tid.clear();
            m_has_ts = m_has_dur = false;
        }
        return true;
    }
    bool end_object() override
    {
        if (m_in_event && m_depth == m_events_depth + 1) {
            m_in_event = false;
            ++events;
            if (!keep())
                return false;
        }
        --m_depth;
        return true;
    }
    bool start_array(std::size_t) override
    {
        if (++m_depth > 64)
            return fail("is nested more than 64 levels deep (the limit)");
        if (m_depth == 1) {
            top_array = true;
            m_events_depth = 1;
        } else if (m_depth == 2 && top_object && m_top_key == "traceEvents") {
            saw_events = true;
            m_events_depth = 2;
        }
        return true;
    }
    bool end_array() override
    {
        if (m_depth == m_events_depth)
            m_events_depth = 0;
        --m_depth;
        return true;
    }
    bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception&) override
    {
        syntax_error = true;
        error_byte = byte;
        return false;
    }

private:
    bool fail(std::string what)
    {
        violation = std::move(what);
        return false;
    }
    enum class Field { none, name, cat, ph, pid, tid, ts, dur };
    bool wanted() const { return m_in_event && m_depth == m_events_depth + 1 && m_field != Field::none; }
    bool scalar(const std::string& text, std::optional<double> number)
    {
        switch (m_field) {
        case Field::name: m_event.name = text; break;
        case Field::cat: m_event.cat = text; break;
        case Field::ph: m_ph = text; break;
        case Field::pid: m_pid = text; break;
        case Field::tid: m_tid = text; break;
        case Field::ts:
            m_has_ts = number.has_value();
            m_event.ts = number.value_or(0);
            break;
        case Field::dur:
            m_has_dur = number.has_value();
            m_event.dur = number.value_or(0);
            break;
        case Field::none: break;
        }
        return true;
    }
    bool keep()
    {
        if (m_ph != "X" || !m_has_ts || !m_has_dur || !std::isfinite(m_event.ts) || !std::isfinite(m_event.dur) ||
            m_event.dur < 0)
            return true;
        if (m_event.name.rfind("ProfilerStep#", 0) == 0) {
            ++step_names[m_event.name];
            return true;
        }
        if (m_event.cat != "" && m_event.cat != "user_annotation" && m_event.cat != "gpu_user_annotation")
            return true;
        std::string_view base = m_event.name;
        if (base.ends_with(".backward"))
            base.remove_suffix(std::string_view(".backward").size());
        const auto parsed = parse_layer_name(base);
        const bool layer =
            parsed ? parsed->rest.empty() : (is_embedding_name(base) || is_head_name(base)) && !base.empty();
        if (!layer)
            return true;
        if (ranges.size() >= kMaxTraceRanges)
            return fail("holds more than " + std::to_string(kMaxTraceRanges) + " layer ranges (the limit)");
        m_event.thread = m_pid + "/" + m_tid;
        m_event.order = ranges.size();
        ranges.push_back(std::move(m_event));
        return true;
    }

    int m_depth = 0;
    int m_events_depth = 0; // depth of the array holding the events; 0 outside it
    bool m_in_event = false;
    std::string m_top_key, m_ph, m_pid, m_tid;
    Field m_field = Field::none;
    bool m_has_ts = false, m_has_dur = false;
    Range m_event;
};

// Drops ranges nested in a range of the same name on the same thread (a module whose forward
// calls record_function itself under a hook that does too): they are part of one call.
std::vector<Range> outermost(std::vector<Range> ranges)
{
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
        return std::tie(a.name, a.thread, a.ts, a.order) < std::tie(b.name, b.thread, b.ts, b.order);
    });
    std::vector<Range> kept;
    for (Range& r : ranges) {
        if (!kept.empty() && kept.back().name == r.name && kept.back().thread == r.thread &&
            r.ts < kept.back().ts + kept.back().dur)
            continue;
        kept.push_back(std::move(r));
    }
    return kept;
}

struct Accumulated {
    double first_ts = 0;
    std::size_t first_order = 0;
    double fwd_sum = 0, bwd_sum = 0;
    int fwd_count = 0, bwd_count = 0;
};

} // namespace

std::optional<LayerName> parse_layer_name(std::string_view name)
{
    const std::vector<std::string_view> parts = components(name);
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        if (std::find(kContainers.begin(), kContainers.end(), parts[i]) == kContainers.end() ||
            !all_digits(parts[i + 1]))
            continue;
        LayerName result{.index = std::stoi(std::string(parts[i + 1]))};
        const std::size_t prefix_end = static_cast<std::size_t>(parts[i].data() + parts[i].size() - name.data());
        result.prefix = std::string(name.substr(0, prefix_end));
        const std::size_t index_end = static_cast<std::size_t>(parts[i + 1].data() + parts[i + 1].size() - name.data());
        if (index_end < name.size())
            result.rest = std::string(name.substr(index_end + 1));
        return result;
    }
    return std::nullopt;
}

bool is_embedding_name(std::string_view name)
{
    return any_component_in(name, kEmbeddings);
}

bool is_head_name(std::string_view name)
{
    return any_component_in(name, kHeads);
}

TraceProfile parse_profiler_trace(std::string_view text, const std::string& origin)
{
    TraceCollector collector;
    nlohmann::json::sax_parse(text.begin(), text.end(), &collector);
    if (!collector.violation.empty())
        trace_fail(origin, collector.violation);
    if (collector.syntax_error)
        trace_fail(origin, "is not valid JSON (byte " + std::to_string(collector.error_byte) + ")");
    if (!collector.top_array && !(collector.top_object && collector.saw_events))
        trace_fail(origin, "is neither a {\"traceEvents\": [...]} object nor a JSON array of trace events");

    std::vector<Range> ranges = outermost(std::move(collector.ranges));
    const bool gpu =
        std::any_of(ranges.begin(), ranges.end(), [](const Range& r) { return r.cat == "gpu_user_annotation"; });
    std::erase_if(ranges, [gpu](const Range& r) { return (r.cat == "gpu_user_annotation") != gpu; });
    std::map<std::string, Accumulated> layers; // forward name -> sums
    std::vector<std::string> orphan_backwards;
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.order < b.order; });
    for (const Range& r : ranges)
        if (!r.name.ends_with(".backward")) {
            auto [it, inserted] = layers.try_emplace(r.name, Accumulated{.first_ts = r.ts, .first_order = r.order});
            it->second.first_ts = std::min(it->second.first_ts, r.ts);
            it->second.fwd_sum += r.dur;
            ++it->second.fwd_count;
        }
    for (const Range& r : ranges)
        if (r.name.ends_with(".backward")) {
            const auto it = layers.find(r.name.substr(0, r.name.size() - std::string_view(".backward").size()));
            if (it == layers.end()) {
                if (std::find(orphan_backwards.begin(), orphan_backwards.end(), r.name) == orphan_backwards.end())
                    orphan_backwards.push_back(r.name);
                continue;
            }
            it->second.bwd_sum += r.dur;
            ++it->second.bwd_count;
        }
    if (layers.empty())
        trace_fail(origin,
                   "has no record_function ranges named after layers (such as 'model.layers.0', "
                   "'embed_tokens' or 'lm_head') among its " +
                       std::to_string(collector.events) + " events");

    // Model order: embeddings, then blocks by (prefix in order of appearance, index), then the rest.
    struct Ordered {
        int group = 0;
        std::size_t prefix_rank = 0;
        int index = 0;
        double first_ts = 0;
        std::size_t first_order = 0;
        std::string name;
    };
    std::map<std::string, std::size_t> prefix_rank;
    std::vector<Ordered> order;
    std::vector<std::pair<std::size_t, std::string>> by_appearance;
    for (const auto& [name, acc] : layers)
        by_appearance.emplace_back(acc.first_order, name);
    std::sort(by_appearance.begin(), by_appearance.end());
    for (const auto& [first, name] : by_appearance) {
        const Accumulated& acc = layers[name];
        Ordered o{.first_ts = acc.first_ts, .first_order = acc.first_order, .name = name};
        if (const auto parsed = parse_layer_name(name)) {
            o.group = 1;
            o.prefix_rank = prefix_rank.try_emplace(parsed->prefix, prefix_rank.size()).first->second;
            o.index = parsed->index;
        } else {
            o.group = is_embedding_name(name) && !is_head_name(name) ? 0 : 2;
        }
        order.push_back(std::move(o));
    }
    std::sort(order.begin(), order.end(), [](const Ordered& a, const Ordered& b) {
        return std::tie(a.group, a.prefix_rank, a.index, a.first_ts, a.first_order) <
            std::tie(b.group, b.prefix_rank, b.index, b.first_ts, b.first_order);
    });

    TraceProfile result;
    result.annotations = gpu ? "gpu_user_annotation" : "user_annotation";
    result.steps = static_cast<int>(collector.step_names.size());
    result.profile.name = std::filesystem::path(origin).stem().string();
    if (result.profile.name.empty())
        result.profile.name = "trace";
    int without_backward = 0;
    for (const Ordered& o : order) {
        const Accumulated& acc = layers[o.name];
        const double fwd = acc.fwd_sum / acc.fwd_count / 1000.0; // trace times are microseconds
        const double bwd = acc.bwd_count ? acc.bwd_sum / acc.bwd_count / 1000.0 : 2.0 * fwd;
        without_backward += acc.bwd_count == 0;
        result.profile.layers.push_back(Layer{.name = o.name,
                                              .params = 0,
                                              .fwd_ms = fwd,
                                              .bwd_ms = bwd,
                                              .bwd_input_ms = bwd / 2.0,
                                              .bwd_weight_ms = bwd / 2.0,
                                              .activation_bytes = 0});
        result.ranges.push_back(acc.fwd_count);
    }
    result.notes.push_back("times from " + std::string(gpu ? "GPU" : "CPU") +
                           " annotations, the mean of each layer's "
                           "ranges over " +
                           std::to_string(result.steps) +
                           " profiler step(s); params and "
                           "activation_bytes are 0 (a trace has times only)");
    if (without_backward > 0)
        result.notes.push_back(std::to_string(without_backward) +
                               " layer(s) have no '<layer>.backward' range: "
                               "bwd_ms = 2 x fwd_ms");
    if (!orphan_backwards.empty())
        result.notes.push_back(std::to_string(orphan_backwards.size()) +
                               " backward range(s) without a forward (e.g. '" +
                               printable(orphan_backwards.front(), 80) + "') were ignored");
    validate_profile(result.profile);
    return result;
}

nlohmann::json trace_profile_json(const TraceProfile& trace)
{
    nlohmann::json out = profile_json(trace.profile);
    out["ok"] = true;
    out["steps"] = trace.steps;
    out["annotations"] = trace.annotations;
    out["ranges"] = trace.ranges;
    out["notes"] = trace.notes;
    return out;
}

TraceProfile load_profiler_trace(const std::string& path)
{
    return parse_profiler_trace(read_input_file(path, kMaxTraceBytes, "trace"), path);
}

} // namespace shardscope::pipeline
