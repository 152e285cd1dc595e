#include "core/checkpoint/verify_json.h"

namespace shardscope {

using nlohmann::json;

json problem_json(const Problem& p)
{
    json out = {{"kind", std::string(to_string(p.kind))}, {"message", p.message}};
    if (p.rank >= 0)
        out["rank"] = p.rank;
    if (!p.path.empty())
        out["path"] = p.path;
    return out;
}

json problem_wire_json(const Problem& p)
{
    return {{"kind", static_cast<int>(p.kind)}, {"rank", p.rank}, {"path", p.path}, {"message", p.message}};
}

Problem problem_from_wire_json(const json& j)
{
    return Problem{.kind = static_cast<ProblemKind>(j.at("kind").get<int>()),
                   .message = j.at("message").get<std::string>(),
                   .path = j.at("path").get<std::string>(),
                   .rank = j.at("rank").get<int>()};
}

json foreign_summary_json(const ForeignSummary& foreign)
{
    json summary = json::object();
    for (const auto& [key, value] : foreign.rows)
        summary[key] = value;
    json tensors = json::array();
    for (const auto& t : foreign.tensors) {
        json entry = {{"name", std::string(t.name)},
                      {"dtype", std::string(t.dtype)},
                      {"shape", std::vector<uint64_t>(t.shape.begin(), t.shape.end())},
                      {"bytes", t.bytes}};
        if (!t.file.empty()) {
            entry["file"] = std::string(t.file);
            entry["offset"] = t.offset;
        }
        if (!t.detail.empty())
            entry["detail"] = std::string(t.detail);
        if (!t.chunks.empty()) {
            json chunks = json::array();
            for (const ForeignChunkView c : t.chunks) {
                json chunk = {{"offsets", std::vector<uint64_t>(c.offsets.begin(), c.offsets.end())},
                              {"sizes", std::vector<uint64_t>(c.sizes.begin(), c.sizes.end())}};
                if (!c.file.empty())
                    chunk["storage"] = {{"file", std::string(c.file)}, {"offset", c.offset}, {"length", c.length}};
                chunks.push_back(std::move(chunk));
            }
            entry["chunks"] = std::move(chunks);
        }
        tensors.push_back(std::move(entry));
    }
    json out = {{"summary", summary}, {"tensor_count", foreign.tensors_total}, {"tensors", tensors}};
    if (foreign.world_size)
        out["world_size"] = *foreign.world_size;
    if (foreign.step)
        out["step"] = *foreign.step;
    return out;
}

json shard_check_json(const ShardCheck& s)
{
    json entry = {{"rank", s.rank},
                  {"path", s.path},
                  {"bytes", s.expected_bytes},
                  {"actual_bytes", s.actual_bytes},
                  {"status", std::string(to_string(s.status))}};
    if (!s.detail.empty())
        entry["detail"] = s.detail;
    return entry;
}

ShardCheck shard_check_from_json(const json& entry)
{
    try {
        ShardCheck check{
            .rank = entry.at("rank").get<int>(),
            .path = entry.at("path").get<std::string>(),
            .expected_bytes = entry.at("bytes").get<uint64_t>(),
            .actual_bytes = entry.at("actual_bytes").get<uint64_t>(),
            .status = ShardStatus::invalid,
            .actual_digest = {},
            .detail = entry.value("detail", std::string()),
        };
        check.status = enum_from_name<ShardStatus>(entry.at("status").get<std::string>(), kShardStatusNames)
                           .value_or(ShardStatus::invalid);
        return check;
    } catch (const json::exception& e) {
        throw Error(ProblemKind::invalid_manifest,
                    std::string("a shard check sent between processes is malformed: ") + e.what());
    }
}

json verify_report_json(const VerifyReport& report)
{
    json shards = json::array();
    for (const ShardCheck& s : report.shards)
        shards.push_back(shard_check_json(s));
    json problems = json::array();
    for (const Problem& p : report.problems)
        problems.push_back(problem_json(p));
    json out = {{"ok", report.ok()},
                {"format", report.format},
                {"path", report.dir.string()},
                {"world_size", report.manifest ? json(report.manifest->world_size) : json(nullptr)},
                {"step", report.manifest ? json(report.manifest->step) : json(nullptr)},
                {"checksum", report.fast ? "xxh3" : "sha256"},
                {"shards", std::move(shards)},
                {"problems", std::move(problems)},
                {"leftover_tmp_files", report.leftover_tmp_files},
                {"cancelled", report.cancelled},
                {"seconds", report.seconds}};
    if (report.foreign)
        out.update(foreign_summary_json(*report.foreign));
    return out;
}

} // namespace shardscope
