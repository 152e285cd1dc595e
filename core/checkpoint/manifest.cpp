#include "core/checkpoint/manifest.h"

#include "core/util/fsutil.h"
#include "core/util/internal/json_limits.h"
#include "core/util/printable.h"
#include "core/util/hashing.h"

#include <algorithm>
#include <map>
#include <set>

namespace shardscope {

using nlohmann::json;

uint64_t Manifest::total_bytes() const
{
    uint64_t total = 0;
    for (const auto& shard : shards)
        total += shard.bytes;
    return total;
}

std::optional<StateHealth> Manifest::health() const
{
    StateHealth sum;
    for (const auto& shard : shards) {
        if (!shard.health)
            return std::nullopt;
        sum += *shard.health;
    }
    return sum;
}

std::string Manifest::describe_health() const
{
    std::string text;
    for (const auto& shard : shards)
        if (shard.health)
            add_rank_findings(text, shard.rank, *shard.health);
    return text;
}

const ShardRecord* Manifest::shard_for_rank(int rank) const
{
    for (const auto& shard : shards)
        if (shard.rank == rank)
            return &shard;
    return nullptr;
}

uint64_t even_shard_offset(uint64_t total, int world_size, int rank)
{
    // floor(total * r / N) without overflow: total = q*N + rem, so it is q*r + floor(rem*r / N).
    const auto n = static_cast<uint64_t>(world_size);
    const auto r = static_cast<uint64_t>(rank);
    return (total / n) * r + (total % n) * r / n;
}

namespace {

// Reads typed fields out of one JSON object, naming the file, the shard and the field on error.
class FieldReader {
public:
    FieldReader(const json& object, std::string display_path, std::string where)
        : m_object(object), m_path(std::move(display_path)), m_where(std::move(where))
    {}

    [[noreturn]] void fail(const std::string& what, ProblemKind kind = ProblemKind::invalid_manifest,
                           int rank = -1) const
    {
        // `what` may quote the file's own values: bounded and without control bytes.
        throw Error(kind, m_path + ": " + m_where + printable(what, 1000), m_path, rank);
    }

    bool has(const char* key) const { return m_object.contains(key) && !m_object[key].is_null(); }

    uint64_t u64(const char* key, uint64_t max_value, int rank = -1) const
    {
        if (!has(key))
            fail(std::string("field '") + key + "' is missing", ProblemKind::invalid_manifest, rank);
        const json& value = m_object[key];
        if (value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0)) {
            const uint64_t number = value.get<uint64_t>();
            if (number > max_value)
                fail(std::string("field '") + key + "' is " + std::to_string(number) + ", above the limit of " +
                         std::to_string(max_value),
                     ProblemKind::invalid_manifest, rank);
            return number;
        }
        fail(std::string("field '") + key + "' must be a non-negative integer, not " + value.dump(),
             ProblemKind::invalid_manifest, rank);
    }

    std::string str(const char* key, int rank = -1) const
    {
        if (!has(key) || !m_object[key].is_string())
            fail(std::string("field '") + key + "' must be a string", ProblemKind::invalid_manifest, rank);
        return m_object[key].get<std::string>();
    }

    double number(const char* key, double fallback) const
    {
        if (!has(key))
            return fallback;
        if (!m_object[key].is_number())
            fail(std::string("field '") + key + "' must be a number");
        return m_object[key].get<double>();
    }

private:
    const json& m_object;
    std::string m_path;
    std::string m_where;
};

const std::set<std::string> kKnownFields = {
    "schema_version",    "world_size",  "step",    "wall_clock_seconds", "shards",
    "param_numel_total", "param_dtype", "tensors", "training_state",     "format"};

std::string rank_prefix(const std::string& display_path, int rank)
{
    return display_path + ": rank " + std::to_string(rank) + ": ";
}

} // namespace

Manifest parse_manifest(std::string_view text, const std::string& display_path)
{
    if (text.size() > kMaxManifestBytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": the manifest is " + std::to_string(text.size()) +
                        " bytes, more than the limit of " + std::to_string(kMaxManifestBytes),
                    display_path);
    // The limits are checked by a linear SAX pass before a DOM of millions of values is built.
    JsonLimits limits;
    limits.max_depth = kMaxManifestDepth;
    limits.max_values = kMaxManifestValues;
    limits.counted_key = "shards";
    limits.max_counted = static_cast<uint64_t>(kMaxWorldSize);
    limits.counted_what = "shards (ranks)";
    if (const JsonScan scan = scan_json_limits(text, limits); !scan.violation.empty())
        throw Error(ProblemKind::invalid_manifest, display_path + ": the manifest " + scan.violation, display_path);
    json root;
    try {
        root = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        std::string what = e.what();
        if (auto pos = what.find("] "); pos != std::string::npos)
            what = what.substr(pos + 2); // drop nlohmann's "[json.exception.parse_error.101]"
        // nlohmann quotes the token it choked on, which may be megabytes long.
        throw Error(ProblemKind::invalid_manifest, display_path + ": not valid JSON: " + printable(what, 1000),
                    display_path);
    }
    if (!root.is_object())
        throw Error(ProblemKind::invalid_manifest, display_path + ": the manifest is not a JSON object", display_path);

    FieldReader top(root, display_path, "");
    Manifest m;
    if (!top.has("schema_version"))
        top.fail("field 'schema_version' is missing");
    if (!root["schema_version"].is_number_integer())
        top.fail("field 'schema_version' must be an integer");
    m.schema_version = static_cast<int>(std::clamp<int64_t>(root["schema_version"].get<int64_t>(), -1, 1 << 30));
    if (m.schema_version != kSchemaVersion)
        top.fail("schema_version " + root["schema_version"].dump() +
                     " is not supported (this build reads schema_version 1)",
                 ProblemKind::unsupported_schema);

    const uint64_t world = top.u64("world_size", static_cast<uint64_t>(kMaxWorldSize));
    if (world == 0)
        top.fail("world_size is 0; a checkpoint needs at least one rank");
    m.world_size = static_cast<int>(world);
    m.step = top.u64("step", kMaxNumel);
    m.wall_clock_seconds = top.number("wall_clock_seconds", 0);
    if (top.has("param_dtype")) {
        const auto dtype = param_dtype_from_string(top.str("param_dtype"));
        if (!dtype)
            top.fail("param_dtype '" + top.str("param_dtype") + "' is neither F16 nor BF16");
        m.param_dtype = *dtype;
    }

    if (!top.has("shards") || !root["shards"].is_array())
        top.fail("field 'shards' must be an array");
    const json& shards = root["shards"];
    if (shards.size() > static_cast<std::size_t>(kMaxWorldSize))
        top.fail("lists " + std::to_string(shards.size()) + " shards, more than the limit of " +
                 std::to_string(kMaxWorldSize));
    m.shards.reserve(shards.size());
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const json& entry = shards[i];
        const std::string where = "shards[" + std::to_string(i) + "]: ";
        if (!entry.is_object())
            FieldReader(entry, display_path, where).fail("is not an object");
        FieldReader field(entry, display_path, where);
        ShardRecord s;
        // The rank is read first so every later complaint about this entry can name it.
        const uint64_t rank = field.u64("rank", static_cast<uint64_t>(kMaxWorldSize));
        s.rank = static_cast<int>(rank);
        FieldReader ranked(entry, display_path, "rank " + std::to_string(s.rank) + ": ");
        s.path = ranked.str("path", s.rank);
        s.sha256 = ranked.str("sha256", s.rank);
        if (!is_hex_digest(s.sha256, 64))
            ranked.fail("sha256 '" + s.sha256.substr(0, 80) + "' is not 64 lowercase hex digits",
                        ProblemKind::invalid_manifest, s.rank);
        if (field.has("xxh3")) {
            s.xxh3 = ranked.str("xxh3", s.rank);
            if (!is_hex_digest(s.xxh3, 16))
                ranked.fail("xxh3 is not 16 lowercase hex digits", ProblemKind::invalid_manifest, s.rank);
        }
        s.bytes = ranked.u64("bytes", kMaxNumel, s.rank);
        s.param_shard_offset = ranked.u64("param_shard_offset", kMaxNumel, s.rank);
        s.param_shard_numel = ranked.u64("param_shard_numel", kMaxNumel, s.rank);
        if (field.has("health"))
            s.health = parse_health(entry["health"], display_path, s.rank);
        m.shards.push_back(std::move(s));
    }

    if (top.has("param_numel_total")) {
        m.param_numel_total = top.u64("param_numel_total", kMaxNumel);
    } else { // older manifests: the shards' ranges define the total
        for (const auto& s : m.shards)
            m.param_numel_total = std::max(m.param_numel_total, s.param_shard_offset + s.param_shard_numel);
        if (m.param_numel_total > kMaxNumel) // each term is <= 2^53, their sum is not
            top.fail("the shards' ranges end at element " + std::to_string(m.param_numel_total) +
                     ", above the limit of " + std::to_string(kMaxNumel));
    }

    if (top.has("tensors")) {
        if (!root["tensors"].is_array())
            top.fail("field 'tensors' must be an array");
        for (std::size_t i = 0; i < root["tensors"].size(); ++i) {
            const json& entry = root["tensors"][i];
            FieldReader field(entry, display_path, "tensors[" + std::to_string(i) + "]: ");
            if (!entry.is_object())
                field.fail("is not an object");
            TensorInfo t;
            t.name = field.str("name");
            t.offset = field.u64("offset", kMaxNumel);
            t.numel = field.u64("numel", kMaxNumel);
            if (entry.contains("shape")) {
                if (!entry["shape"].is_array())
                    field.fail("field 'shape' must be an array");
                for (const auto& dim : entry["shape"]) {
                    if (!dim.is_number_unsigned())
                        field.fail("shape has a non-integer dimension");
                    t.shape.push_back(dim.get<uint64_t>());
                }
            }
            if (t.offset + t.numel > m.param_numel_total)
                field.fail("tensor '" + t.name + "' ends past param_numel_total");
            m.tensors.push_back(std::move(t));
        }
    }
    if (root.contains("training_state"))
        m.training_state = root["training_state"];
    for (const auto& [key, value] : root.items())
        if (!kKnownFields.count(key))
            m.extra[key] = value;
    return m;
}

nlohmann::ordered_json shard_record_json(const ShardRecord& s)
{
    nlohmann::ordered_json entry;
    entry["rank"] = s.rank;
    entry["path"] = s.path;
    entry["sha256"] = s.sha256;
    if (!s.xxh3.empty())
        entry["xxh3"] = s.xxh3;
    entry["bytes"] = s.bytes;
    entry["param_shard_offset"] = s.param_shard_offset;
    entry["param_shard_numel"] = s.param_shard_numel;
    if (s.health)
        entry["health"] = health_json(*s.health);
    return entry;
}

std::string serialize_manifest(const Manifest& m)
{
    nlohmann::ordered_json root;
    root["schema_version"] = m.schema_version;
    root["format"] = "shardscope";
    root["world_size"] = m.world_size;
    root["step"] = m.step;
    root["wall_clock_seconds"] = m.wall_clock_seconds;
    root["param_dtype"] = std::string(to_string(m.param_dtype));
    root["param_numel_total"] = m.param_numel_total;
    nlohmann::ordered_json shards = nlohmann::ordered_json::array();
    for (const auto& s : m.shards)
        shards.push_back(shard_record_json(s));
    root["shards"] = std::move(shards);
    if (!m.tensors.empty()) {
        nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
        for (const auto& t : m.tensors)
            tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"offset", t.offset}, {"numel", t.numel}});
        root["tensors"] = std::move(tensors);
    }
    if (!m.training_state.is_null())
        root["training_state"] = nlohmann::ordered_json::parse(m.training_state.dump());
    if (m.extra.is_object())
        for (const auto& [key, value] : m.extra.items())
            root[key] = nlohmann::ordered_json::parse(value.dump());
    return root.dump(2) + "\n";
}

std::vector<Problem> check_manifest(const Manifest& m, int expected_world_size, const std::string& display_path)
{
    std::vector<Problem> problems;
    auto add = [&](ProblemKind kind, int rank, std::string path, std::string message) {
        problems.push_back({.kind = kind, .message = std::move(message), .path = std::move(path), .rank = rank});
    };

    if (expected_world_size >= 0 && m.world_size != expected_world_size)
        add(ProblemKind::world_size_mismatch, -1, display_path,
            display_path + ": the checkpoint was saved with world_size " + std::to_string(m.world_size) + " but " +
                std::to_string(expected_world_size) + " ranks are expected (world size change); reshard it to " +
                std::to_string(expected_world_size) + " ranks before resuming");

    if (m.shards.size() != static_cast<std::size_t>(m.world_size))
        add(ProblemKind::shard_count_mismatch, -1, display_path,
            display_path + ": lists " + std::to_string(m.shards.size()) + " shards but world_size is " +
                std::to_string(m.world_size) + " (shard count mismatch)");

    std::map<int, int> seen; // rank -> count
    std::set<std::string> paths;
    for (const auto& s : m.shards) {
        if (s.rank >= m.world_size)
            add(ProblemKind::shard_count_mismatch, s.rank, s.path,
                rank_prefix(display_path, s.rank) + "rank is outside 0.." + std::to_string(m.world_size - 1) +
                    " for world_size " + std::to_string(m.world_size));
        if (++seen[s.rank] == 2)
            add(ProblemKind::duplicate_rank, s.rank, s.path,
                rank_prefix(display_path, s.rank) + "rank " + std::to_string(s.rank) +
                    " appears more than once in the shard list");
        if (auto why = fsutil::unsafe_name_reason(s.path))
            add(ProblemKind::path_outside_checkpoint, s.rank, s.path,
                rank_prefix(display_path, s.rank) + "path '" + printable(s.path) +
                    "' leaves the checkpoint directory: " + *why);
        else if (!paths.insert(s.path).second)
            add(ProblemKind::invalid_manifest, s.rank, s.path,
                rank_prefix(display_path, s.rank) + "path '" + printable(s.path) + "' is used by another rank too");
    }
    if (m.shards.size() < static_cast<std::size_t>(m.world_size)) {
        std::string absent;
        int listed = 0;
        for (int r = 0; r < m.world_size && listed < 8; ++r)
            if (!seen.count(r)) {
                absent += (absent.empty() ? "" : ", ") + std::to_string(r);
                ++listed;
            }
        if (!absent.empty())
            add(ProblemKind::missing_shard, -1, display_path,
                display_path + ": no shard is listed for rank(s) " + absent + (listed == 8 ? ", ..." : ""));
    }

    // The shards' ranges must tile [0, param_numel_total) exactly.
    std::vector<const ShardRecord*> by_offset;
    for (const auto& s : m.shards)
        by_offset.push_back(&s);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) {
        return a->param_shard_offset < b->param_shard_offset ||
            (a->param_shard_offset == b->param_shard_offset && a->param_shard_numel < b->param_shard_numel);
    });
    uint64_t covered = 0;
    for (const ShardRecord* s : by_offset) {
        const uint64_t begin = s->param_shard_offset;
        const uint64_t end = begin + s->param_shard_numel; // both <= 2^53: no overflow
        const std::string range = "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
        if (begin > covered)
            add(ProblemKind::layout_gap, s->rank, s->path,
                rank_prefix(display_path, s->rank) + "parameter range " + range + " leaves [" +
                    std::to_string(covered) + ", " + std::to_string(begin) + ") owned by no rank");
        else if (begin < covered && s->param_shard_numel > 0)
            add(ProblemKind::layout_overlap, s->rank, s->path,
                rank_prefix(display_path, s->rank) + "parameter range " + range +
                    " overlaps another rank's range ending at " + std::to_string(covered));
        covered = std::max(covered, end);
    }
    if (covered < m.param_numel_total)
        add(ProblemKind::layout_gap, -1, display_path,
            display_path + ": parameters [" + std::to_string(covered) + ", " + std::to_string(m.param_numel_total) +
                ") are owned by no rank");
    else if (covered > m.param_numel_total)
        add(ProblemKind::layout_overlap, -1, display_path,
            display_path + ": the shards cover " + std::to_string(covered) + " parameters but param_numel_total is " +
                std::to_string(m.param_numel_total));
    return problems;
}

} // namespace shardscope
