#include "core/foreign/dcp_hf.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/dcp_layout.h"
#include "core/util/internal/json_limits.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

// The digits of `name` from `at` up to `end`, or -1 (none, or too many).
int64_t digits(std::string_view name, std::size_t& at)
{
    const std::size_t start = at;
    int64_t value = 0;
    while (at < name.size() && name[at] >= '0' && name[at] <= '9' && at - start < 9)
        value = value * 10 + (name[at++] - '0');
    return at > start && (at == name.size() || name[at] < '0' || name[at] > '9') ? value : -1;
}

// S of shard-<S>-model-<I>-of-<N>.safetensors, or -1.
int64_t shard_number(std::string_view name)
{
    std::size_t at = 6;
    if (!name.starts_with("shard-"))
        return -1;
    const int64_t shard = digits(name, at);
    if (shard < 0 || name.substr(at, 7) != "-model-")
        return -1;
    at += 7;
    if (digits(name, at) < 0 || name.substr(at, 4) != "-of-")
        return -1;
    at += 4;
    if (digits(name, at) < 0 || name.substr(at) != ".safetensors")
        return -1;
    return shard;
}

// torch's names for the safetensors dtypes (its HuggingFaceStorageReader maps them the same way).
std::string torch_dtype_of(std::string_view safetensors_dtype)
{
    static const std::map<std::string_view, std::string> names = {{"BOOL", "bool"},
                                                                  {"U8", "uint8"},
                                                                  {"I8", "int8"},
                                                                  {"F8_E5M2", "float8_e5m2"},
                                                                  {"F8_E4M3", "float8_e4m3fn"},
                                                                  {"I16", "int16"},
                                                                  {"U16", "uint16"},
                                                                  {"F16", "float16"},
                                                                  {"BF16", "bfloat16"},
                                                                  {"I32", "int32"},
                                                                  {"U32", "uint32"},
                                                                  {"F32", "float32"},
                                                                  {"F64", "float64"},
                                                                  {"I64", "int64"},
                                                                  {"U64", "uint64"},
                                                                  {"C64", "complex64"}};
    const auto it = names.find(safetensors_dtype);
    return it == names.end() ? std::string(safetensors_dtype) : it->second;
}

[[noreturn]] void bad(const std::string& display, const std::string& what)
{
    throw Error(ProblemKind::invalid_shard, display + ": " + what);
}

// A chunk as the headers give it, before the tensors are laid out end to end.
struct HfChunk {
    std::vector<uint64_t> offsets, sizes;
    int32_t file = 0;
    uint64_t offset = 0, length = 0;
};
struct HfTensor {
    std::string fqn, dtype;
    std::vector<HfChunk> chunks;
};

// One file's chunks: its header's tensors placed by its DCP_SHARDING_INFO, checked against each
// other; Error naming the file when they disagree.
std::vector<std::pair<std::string, HfChunk>> chunks_of_file(const DcpHfShard& shard, int32_t file_index,
                                                            const std::string& display,
                                                            std::vector<std::string>& dtypes)
{
    const SafetensorsListing& l = shard.listing;
    std::map<std::string, std::vector<uint64_t>, std::less<>> placed;
    bool has_info = false;
    for (const auto& [key, value] : l.metadata)
        if (key == "DCP_SHARDING_INFO") {
            has_info = true;
            for (auto& [fqn, offsets] : parse_dcp_sharding_info(value, display))
                placed.emplace(fqn, std::move(offsets));
        }
    std::vector<std::pair<std::string, HfChunk>> out;
    for (const auto& t : l.tensors) {
        const std::string fqn(l.name(t));
        const auto shape = l.shape(t);
        HfChunk chunk{.sizes = {shape.begin(), shape.end()},
                      .file = file_index,
                      .offset = l.data_start() + t.begin,
                      .length = t.bytes()};
        if (!has_info) { // as torch reads a file without it: the chunk is the whole tensor
            chunk.offsets.assign(shape.size(), 0);
        } else {
            const auto it = placed.find(fqn);
            if (it == placed.end())
                bad(display,
                    "DCP_SHARDING_INFO has no saved_offsets for tensor '" + printable(fqn) +
                        "', which the header holds");
            if (it->second.size() != shape.size())
                bad(display,
                    "DCP_SHARDING_INFO places tensor '" + printable(fqn) + "' with " +
                        std::to_string(it->second.size()) + " offsets, but the header gives it " +
                        std::to_string(shape.size()) + " dimensions");
            chunk.offsets = it->second;
            placed.erase(it);
        }
        for (std::size_t d = 0; d < shape.size(); ++d)
            if (uint64_t end = 0; __builtin_add_overflow(chunk.offsets[d], shape[d], &end) || end > (uint64_t(1) << 62))
                bad(display,
                    "tensor '" + printable(fqn) + "' has a chunk at " + join_dims(chunk.offsets) + " of size " +
                        join_dims(chunk.sizes) + " outside any tensor it could belong to");
        dtypes.push_back(torch_dtype_of(l.dtype(t)));
        out.emplace_back(fqn, std::move(chunk));
    }
    if (!placed.empty())
        bad(display,
            "DCP_SHARDING_INFO places tensor '" + printable(placed.begin()->first) +
                "', which the header does not hold");
    return out;
}

} // namespace

int dcp_hf_shard_rank(std::string_view name)
{
    const int64_t shard = shard_number(name);
    return shard >= 1 ? int(shard - 1) : -1;
}

bool is_dcp_hf_shard_name(std::string_view name)
{
    return shard_number(name) >= 0;
}

std::vector<std::pair<std::string, std::vector<uint64_t>>> parse_dcp_sharding_info(std::string_view json,
                                                                                   const std::string& display)
{
    JsonLimits limits;
    limits.max_depth = 4;
    limits.unique_top_keys = true;
    const JsonScan scan = scan_json_limits(json, limits);
    if (!scan.violation.empty())
        bad(display, "DCP_SHARDING_INFO " + scan.violation);
    if (!scan.duplicate_key.empty())
        bad(display, "DCP_SHARDING_INFO names tensor '" + printable(scan.duplicate_key) + "' twice");
    nlohmann::ordered_json info;
    try {
        info = nlohmann::ordered_json::parse(json.begin(), json.end());
    } catch (const nlohmann::json::exception& e) {
        bad(display, std::string("DCP_SHARDING_INFO is not valid JSON (") + e.what() + ")");
    }
    if (!info.is_object())
        bad(display, "DCP_SHARDING_INFO is not a JSON object");
    std::vector<std::pair<std::string, std::vector<uint64_t>>> out;
    for (const auto& [fqn, entry] : info.items()) {
        const auto offsets = entry.is_object() ? entry.find("saved_offsets") : entry.end();
        if (!entry.is_object() || offsets == entry.end() || !offsets->is_array())
            bad(display, "DCP_SHARDING_INFO's entry for '" + printable(fqn) + "' has no saved_offsets list");
        if (offsets->size() > kMaxDcpDims)
            bad(display,
                "DCP_SHARDING_INFO's entry for '" + printable(fqn) + "' has more than " + std::to_string(kMaxDcpDims) +
                    " saved_offsets (the limit)");
        std::vector<uint64_t> values;
        for (const auto& v : *offsets) {
            if (!v.is_number_unsigned())
                bad(display,
                    "DCP_SHARDING_INFO's saved_offsets for '" + printable(fqn) +
                        "' holds something other than a non-negative integer");
            values.push_back(v.get<uint64_t>());
        }
        out.emplace_back(fqn, std::move(values));
    }
    return out;
}

DcpMetadata assemble_dcp_hf(const std::vector<DcpHfShard>& shards, const fs::path& dir, std::vector<Problem>& problems)
{
    DcpMetadata meta;
    std::vector<HfTensor> tensors;
    std::map<std::string, std::size_t, std::less<>> index;
    for (const auto& shard : shards) {
        const int rank = dcp_rank_of(shard.file);
        const std::string display =
            (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + (dir / shard.file).string();
        try {
            std::vector<std::string> dtypes;
            auto chunks = chunks_of_file(shard, int32_t(meta.files.size()), display, dtypes);
            // Agreement with the other files first, so that a file is taken whole or not at all.
            for (std::size_t i = 0; i < chunks.size(); ++i)
                if (const auto it = index.find(chunks[i].first); it != index.end()) {
                    const HfTensor& t = tensors[it->second];
                    if (t.dtype != dtypes[i] || t.chunks[0].sizes.size() != chunks[i].second.sizes.size())
                        bad(display,
                            "tensor '" + printable(t.fqn) + "' is " + dtypes[i] + " with " +
                                std::to_string(chunks[i].second.sizes.size()) + " dimensions here but " + t.dtype +
                                " with " + std::to_string(t.chunks[0].sizes.size()) + " in an earlier file");
                }
            meta.files.push_back(shard.file);
            for (std::size_t i = 0; i < chunks.size(); ++i) {
                auto [it, added] = index.try_emplace(chunks[i].first, tensors.size());
                if (added)
                    tensors.push_back({.fqn = chunks[i].first, .dtype = dtypes[i]});
                tensors[it->second].chunks.push_back(std::move(chunks[i].second));
            }
        } catch (const Error& e) {
            rethrow_remote(e);
            Problem p = e.problem();
            p.path = shard.file;
            p.rank = rank;
            problems.push_back(std::move(p));
        }
    }
    // Files were taken in name order, which DcpMetadata::files keeps sorted.
    for (auto& t : tensors) {
        DcpTensor out{.fqn = t.fqn, .dtype = t.dtype, .first_chunk = uint32_t(meta.chunks.size())};
        out.size.assign(t.chunks[0].sizes.size(), 0);
        for (const auto& c : t.chunks) {
            for (std::size_t d = 0; d < out.size.size(); ++d)
                out.size[d] = std::max(out.size[d], c.offsets[d] + c.sizes[d]);
            meta.chunks.push_back({.offsets_at = uint32_t(meta.numbers.size()),
                                   .sizes_at = uint32_t(meta.numbers.size() + c.offsets.size()),
                                   .offsets_rank = uint16_t(c.offsets.size()),
                                   .sizes_rank = uint16_t(c.sizes.size()),
                                   .file = c.file,
                                   .offset = c.offset,
                                   .length = c.length});
            meta.numbers.insert(meta.numbers.end(), c.offsets.begin(), c.offsets.end());
            meta.numbers.insert(meta.numbers.end(), c.sizes.begin(), c.sizes.end());
        }
        out.chunk_count = uint32_t(t.chunks.size());
        meta.tensors.push_back(std::move(out));
    }
    for (const auto& shard : shards)
        for (const auto& [key, value] : shard.listing.metadata)
            if (key == "DCP_VERSION" || key == "format")
                meta.info.try_emplace(key == "format" ? "__metadata__ format" : key, printable(value));
    return meta;
}

DcpHfLayout read_dcp_hf(const storage::Folder& dir)
{
    DcpHfLayout out;
    std::vector<DcpHfShard> shards;
    std::size_t values = 0;
    for (const auto& name : dir.names) {
        if (!is_dcp_hf_shard_name(name))
            continue;
        const int rank = dcp_rank_of(name);
        const std::string display =
            (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + (dir.path / name).string();
        const storage::OpenedObject file = dir.open(name);
        if (file.status != fsutil::OpenStatus::ok) {
            out.problems.push_back({.kind = file.status == fsutil::OpenStatus::outside
                                        ? ProblemKind::path_outside_checkpoint
                                        : ProblemKind::unreadable,
                                    .message = display + ": " + file.reason,
                                    .path = name,
                                    .rank = rank});
            continue;
        }
        try {
            shards.push_back(
                {.file = name, .listing = read_safetensors_listing(*file.reader, file.size, display, rank)});
            values += shards.back().listing.dims.size();
            if (values > kMaxDcpDimensionValues)
                throw Error(ProblemKind::invalid_shard,
                            display + ": the shard files hold more than " + std::to_string(kMaxDcpDimensionValues) +
                                " tensor dimensions in all (the limit)");
        } catch (const Error& e) {
            rethrow_remote(e);
            Problem p = e.problem();
            p.path = name;
            p.rank = rank;
            out.problems.push_back(std::move(p));
            if (values > kMaxDcpDimensionValues)
                break;
        }
    }
    out.meta = assemble_dcp_hf(shards, dir.path, out.problems);
    return out;
}

VerifyReport verify_dcp_hf(const storage::Folder& listed, const VerifyOptions& options, bool check_data)
{
    VerifyReport report =
        foreign::new_report("torch-dcp-hf", listed.path,
                            "torch-dcp-hf (torch.distributed.checkpoint Hugging Face storage, per-rank shards)");
    DcpHfLayout layout = read_dcp_hf(listed);
    if (layout.meta.files.empty() && layout.problems.empty())
        layout.problems.push_back(
            {.kind = ProblemKind::missing_file,
             .message = listed.path.string() + ": no shard-<S>-model-<I>-of-<N>.safetensors file to read"});
    DcpSource src;
    src.described = listed.path.string();
    src.from_headers = true;
    src.files_left_out = !layout.problems.empty();
    src.is_data_file = [](const std::string& n) { return n.ends_with(".safetensors") && !is_dcp_hf_shard_name(n); };
    verify_dcp_layout(listed, layout.meta, src, report, options, check_data);
    report.problems.insert(report.problems.begin(), layout.problems.begin(), layout.problems.end());
    return report;
}

} // namespace shardscope
