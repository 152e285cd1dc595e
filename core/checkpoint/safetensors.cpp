#include "core/checkpoint/safetensors.h"

#include "core/util/error.h"
#include "core/util/fsutil.h"
#include "core/util/internal/json_limits.h"
#include "core/util/printable.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

namespace shardscope {

static_assert(std::endian::native == std::endian::little,
              "safetensors and the shard format are little-endian; this build assumes a "
              "little-endian host");

const SafetensorsTensor* SafetensorsHeader::find(std::string_view name) const
{
    for (const auto& tensor : tensors)
        if (tensor.name == name)
            return &tensor;
    return nullptr;
}

std::optional<uint64_t> safetensors_dtype_size(std::string_view dtype)
{
    static const std::map<std::string_view, uint64_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}, {"C64", 8},
    };
    const auto it = sizes.find(dtype);
    if (it == sizes.end())
        return std::nullopt;
    return it->second;
}

std::string make_safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata)
{
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    for (const auto& tensor : tensors)
        header[tensor.name] = {
            {"dtype", tensor.dtype}, {"shape", tensor.shape}, {"data_offsets", {tensor.begin, tensor.end}}};
    std::string json = header.dump();
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    uint64_t length = json.size();
    std::memcpy(out.data(), &length, 8);
    return out + json;
}

namespace {

[[noreturn]] void bad(const std::string& display_path, int rank, const std::string& what)
{
    std::string prefix = display_path;
    if (rank >= 0)
        prefix += " (rank " + std::to_string(rank) + ")";
    // `what` quotes tensor names and dtypes from the file: bounded and without control bytes.
    throw Error(ProblemKind::invalid_shard, prefix + ": invalid safetensors header: " + printable(what, 1000),
                display_path, rank);
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t& out)
{
    return !__builtin_mul_overflow(a, b, &out);
}

} // namespace

std::string safetensors_range_fault(const std::string& name, uint64_t begin, uint64_t end, uint64_t bytes)
{
    if (end < begin)
        return "tensor '" + name + "' has data_offsets that end (" + std::to_string(end) + ") before they begin (" +
            std::to_string(begin) + ")";
    if (end - begin != bytes)
        return "tensor '" + name + "' covers " + std::to_string(end - begin) + " bytes but its shape and dtype need " +
            std::to_string(bytes);
    return "";
}

std::string safetensors_text_fault(std::string_view json)
{
    const std::size_t nul = json.find('\0');
    return nul == std::string_view::npos
        ? ""
        : "its JSON holds a NUL byte at byte " + std::to_string(nul) + ", which JSON does not allow";
}

SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t file_size, const std::string& display_path,
                                           int rank)
{
    SafetensorsHeader result;
    result.header_length = json.size();
    if (std::string fault = safetensors_text_fault(json); !fault.empty())
        bad(display_path, rank, fault);

    // A linear SAX pass first: limits (before a DOM is built) and duplicate names, which
    // nlohmann's DOM would silently collapse to the last one.
    JsonLimits limits;
    limits.max_depth = kMaxSafetensorsHeaderDepth;
    limits.max_values = kMaxSafetensorsHeaderValues;
    limits.unique_top_keys = true;
    const JsonScan scan = scan_json_limits(json, limits);
    if (!scan.violation.empty())
        bad(display_path, rank, "the header " + scan.violation);
    const std::string& duplicate = scan.duplicate_key;
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(json.begin(), json.end());
    } catch (const nlohmann::json::exception& e) {
        bad(display_path, rank, std::string("not valid JSON (") + e.what() + ")");
    }
    if (!duplicate.empty())
        bad(display_path, rank, "tensor '" + duplicate + "' appears twice");
    if (!header.is_object())
        bad(display_path, rank, "the header is not a JSON object");

    for (const auto& [name, value] : header.items()) {
        if (name == "__metadata__") {
            if (!value.is_object())
                bad(display_path, rank, "__metadata__ is not an object");
            for (const auto& [key, text] : value.items()) {
                if (!text.is_string())
                    bad(display_path, rank, "__metadata__ value '" + key + "' is not a string");
                result.metadata[key] = text.get<std::string>();
            }
            continue;
        }
        if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
            !value.contains("data_offsets"))
            bad(display_path, rank, "tensor '" + name + "' lacks dtype, shape or data_offsets");
        SafetensorsTensor tensor;
        tensor.name = name;
        const auto& dtype = value["dtype"];
        if (!dtype.is_string())
            bad(display_path, rank, "tensor '" + name + "' has a non-string dtype");
        tensor.dtype = dtype.get<std::string>();
        const auto element = safetensors_dtype_size(tensor.dtype);
        if (!element)
            bad(display_path, rank, "tensor '" + name + "' has unknown dtype '" + tensor.dtype + "'");
        const auto& shape = value["shape"];
        if (!shape.is_array() || shape.size() > 64)
            bad(display_path, rank, "tensor '" + name + "' has an invalid shape");
        uint64_t bytes = *element;
        for (const auto& dim : shape) {
            if (!dim.is_number_unsigned())
                bad(display_path, rank, "tensor '" + name + "' has a non-integer dimension");
            tensor.shape.push_back(dim.get<uint64_t>());
            if (!checked_mul(bytes, tensor.shape.back(), bytes))
                bad(display_path, rank, "tensor '" + name + "' has a shape whose size overflows");
        }
        const auto& offsets = value["data_offsets"];
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
            !offsets[1].is_number_unsigned())
            bad(display_path, rank, "tensor '" + name + "' has invalid data_offsets");
        tensor.begin = offsets[0].get<uint64_t>();
        tensor.end = offsets[1].get<uint64_t>();
        if (std::string fault = safetensors_range_fault(name, tensor.begin, tensor.end, bytes); !fault.empty())
            bad(display_path, rank, fault);
        result.tensors.push_back(std::move(tensor));
    }

    // Ties (an overlap of equal ranges) broken by name, so the sentence names the same tensor
    // whatever order the header lists them in (and core/foreign's streaming listing agrees).
    std::sort(result.tensors.begin(), result.tensors.end(), [](const auto& a, const auto& b) {
        return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    uint64_t expected = 0;
    for (const auto& tensor : result.tensors) {
        if (tensor.begin != expected)
            bad(display_path, rank,
                "tensor '" + tensor.name + "' starts at byte " + std::to_string(tensor.begin) +
                    " of the data but the previous tensor ends at " + std::to_string(expected) +
                    (tensor.begin > expected ? " (a gap)" : " (an overlap)"));
        expected = tensor.end;
    }
    if (file_size < result.data_start())
        bad(display_path, rank,
            "the " + std::to_string(result.header_length) + "-byte header runs past the end of the " +
                std::to_string(file_size) + "-byte file");
    const uint64_t data_size = file_size - result.data_start();
    if (expected != data_size)
        bad(display_path, rank,
            "the tensors end at data byte " + std::to_string(expected) + " but the file holds " +
                std::to_string(data_size) + " data bytes");
    return result;
}

std::string read_safetensors_header_json(const storage::Reader& file, uint64_t file_size,
                                         const std::string& display_path, int rank)
{
    if (file_size < 8)
        bad(display_path, rank,
            "the file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
    // One read of the first bytes holds the length and, for all but huge headers, the header: a
    // remote object's header then costs one request instead of two.
    std::string first(static_cast<std::size_t>(std::min<uint64_t>(file_size, kHeaderProbeBytes)), '\0');
    if (!file.read(first.data(), first.size(), 0))
        throw Error(ProblemKind::unreadable, display_path + ": cannot read the header length", display_path, rank);
    uint64_t length = 0;
    std::memcpy(&length, first.data(), 8);
    if (length > kMaxSafetensorsHeader)
        bad(display_path, rank, "the header length " + std::to_string(length) + " exceeds the 100 MB limit");
    if (length > file_size - 8)
        bad(display_path, rank,
            "the header length " + std::to_string(length) + " runs past the end of the " + std::to_string(file_size) +
                "-byte file");
    if (8 + length <= first.size())
        return first.substr(8, length);
    std::string json(length, '\0');
    if (!file.read(json.data(), json.size(), 8))
        throw Error(ProblemKind::unreadable, display_path + ": cannot read the header", display_path, rank);
    return json;
}

SafetensorsHeader read_safetensors_header(const storage::Reader& file, uint64_t file_size,
                                          const std::string& display_path, int rank)
{
    return parse_safetensors_header(read_safetensors_header_json(file, file_size, display_path, rank), file_size,
                                    display_path, rank);
}

} // namespace shardscope
