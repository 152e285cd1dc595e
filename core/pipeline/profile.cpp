#include "core/pipeline/profile.h"

#include "core/util/error.h"
#include "core/util/internal/json_limits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardscope::pipeline {
namespace {

// A layer as read, before defaults: which fields were present matters for the defaults and for
// the "missing field" errors, so everything is optional here.
struct RawLayer {
    std::optional<std::string> name;
    std::optional<double> params;
    std::optional<double> fwd_ms;
    std::optional<double> fwd_flops;
    std::optional<double> bwd_ms;
    std::optional<double> bwd_input_ms;
    std::optional<double> bwd_weight_ms;
    std::optional<double> activation_bytes;
};

constexpr std::array<std::string_view, 8> kKnownFields = {
    "name",   "params",        "fwd_ms",       "fwd_flops",
    "bwd_ms", "bwd_input_ms", "bwd_weight_ms", "activation_bytes"};

std::string known_fields_text()
{
    std::string text;
    for (std::string_view field : kKnownFields) {
        if (!text.empty())
            text += ", ";
        text += field;
    }
    return text;
}

[[noreturn]] void fail(const std::string& origin, const std::string& what)
{
    throw Error(ProblemKind::invalid_profile, "profile " + origin + ": " + what, origin);
}

// Relative tolerance used when a profile gives bwd_ms and both halves: measured numbers are
// printed rounded, so an exact equality test would reject honest files.
bool close_enough(double a, double b)
{
    return std::fabs(a - b) <= 1e-6 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

std::int64_t to_count(double value, const std::string& origin, const std::string& where,
                      std::string_view field)
{
    // 2^63 is exactly representable; anything at or above it does not fit an int64.
    if (value != std::floor(value) || value >= 9.2233720368547758e18)
        fail(origin, where + ": '" + std::string(field) +
                         "' must be a whole number that fits 64 bits, not " + std::to_string(value));
    return static_cast<std::int64_t>(value);
}

Layer finish_layer(const RawLayer& raw, std::size_t index, const std::string& origin,
                   const std::string& where_prefix, std::optional<double> device_tflops)
{
    const std::string where =
        where_prefix + "layer " + std::to_string(index) + (raw.name ? " ('" + *raw.name + "')" : "");
    auto require = [&](const auto& field, std::string_view key) {
        if (!field)
            fail(origin, where + " has no '" + std::string(key) + "'");
    };
    require(raw.name, "name");
    require(raw.params, "params");
    require(raw.activation_bytes, "activation_bytes");
    if (raw.fwd_ms && raw.fwd_flops)
        fail(origin, where + " gives both 'fwd_ms' and 'fwd_flops'; give one");
    if (!raw.fwd_ms && !raw.fwd_flops)
        fail(origin, where + " has neither 'fwd_ms' nor 'fwd_flops'");

    auto check = [&](const std::optional<double>& value, std::string_view key) {
        if (value && (!std::isfinite(*value) || *value < 0.0))
            fail(origin, where + ": '" + std::string(key) + "' must be a finite number >= 0, not " +
                             std::to_string(*value));
    };
    check(raw.params, "params");
    check(raw.fwd_ms, "fwd_ms");
    check(raw.fwd_flops, "fwd_flops");
    check(raw.bwd_ms, "bwd_ms");
    check(raw.bwd_input_ms, "bwd_input_ms");
    check(raw.bwd_weight_ms, "bwd_weight_ms");
    check(raw.activation_bytes, "activation_bytes");

    Layer layer;
    layer.name = *raw.name;
    layer.params = to_count(*raw.params, origin, where, "params");
    layer.activation_bytes = to_count(*raw.activation_bytes, origin, where, "activation_bytes");
    if (raw.fwd_ms) {
        layer.fwd_ms = *raw.fwd_ms;
    } else {
        if (!device_tflops)
            fail(origin, where + " gives 'fwd_flops' but the profile has no 'device_tflops' to "
                                 "convert FLOPs into time");
        // FLOPs / (TFLOP/s * 1e12) seconds = FLOPs / (TFLOP/s * 1e9) ms.
        layer.fwd_ms = *raw.fwd_flops / (*device_tflops * 1e9);
    }

    if (raw.bwd_ms) {
        layer.bwd_ms = *raw.bwd_ms;
        if (raw.bwd_input_ms && raw.bwd_weight_ms) {
            if (!close_enough(*raw.bwd_input_ms + *raw.bwd_weight_ms, layer.bwd_ms))
                fail(origin, where + ": 'bwd_input_ms' + 'bwd_weight_ms' must equal 'bwd_ms'");
            layer.bwd_input_ms = *raw.bwd_input_ms;
            layer.bwd_weight_ms = layer.bwd_ms - layer.bwd_input_ms;
        } else if (raw.bwd_input_ms || raw.bwd_weight_ms) {
            const double given = raw.bwd_input_ms ? *raw.bwd_input_ms : *raw.bwd_weight_ms;
            if (given > layer.bwd_ms)
                fail(origin, where + ": '" +
                                 std::string(raw.bwd_input_ms ? "bwd_input_ms" : "bwd_weight_ms") +
                                 "' is larger than 'bwd_ms'");
            layer.bwd_input_ms = raw.bwd_input_ms ? given : layer.bwd_ms - given;
            layer.bwd_weight_ms = layer.bwd_ms - layer.bwd_input_ms;
        } else {
            layer.bwd_input_ms = layer.bwd_ms / 2.0;
            layer.bwd_weight_ms = layer.bwd_ms / 2.0;
        }
    } else if (raw.bwd_input_ms && raw.bwd_weight_ms) {
        layer.bwd_input_ms = *raw.bwd_input_ms;
        layer.bwd_weight_ms = *raw.bwd_weight_ms;
        layer.bwd_ms = layer.bwd_input_ms + layer.bwd_weight_ms;
    } else if (raw.bwd_input_ms || raw.bwd_weight_ms) {
        fail(origin, where + " gives only one of 'bwd_input_ms' / 'bwd_weight_ms'; give both, or "
                             "'bwd_ms' as well");
    } else {
        layer.bwd_ms = 2.0 * layer.fwd_ms;
        layer.bwd_input_ms = layer.fwd_ms;
        layer.bwd_weight_ms = layer.fwd_ms;
    }
    if (!std::isfinite(layer.fwd_ms) || !std::isfinite(layer.bwd_ms))
        fail(origin, where + ": its costs overflow");
    return layer;
}

std::optional<double> json_number(const nlohmann::json& layer, std::string_view key,
                                  const std::string& origin, const std::string& where)
{
    const auto it = layer.find(key);
    if (it == layer.end() || it->is_null())
        return std::nullopt;
    if (!it->is_number())
        fail(origin, where + ": '" + std::string(key) + "' must be a number, not " +
                         std::string(it->type_name()) + " " + it->dump());
    return it->get<double>();
}

std::optional<double> parse_tflops(const nlohmann::json& value, const std::string& origin)
{
    if (value.is_null())
        return std::nullopt;
    if (!value.is_number() || !(value.get<double>() > 0.0) || !std::isfinite(value.get<double>()))
        fail(origin, "'device_tflops' must be a number > 0");
    return value.get<double>();
}

std::string file_stem(const std::string& origin)
{
    const std::string stem = std::filesystem::path(origin).stem().string();
    return stem.empty() ? std::string("profile") : stem;
}

// ---- CSV

std::string_view trim(std::string_view text)
{
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
        text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
        text.remove_suffix(1);
    return text;
}

// RFC 4180 fields on one line: commas separate, double quotes may wrap a field ("" = a quote),
// so a layer name may contain a comma. Newlines inside quotes are not supported.
std::vector<std::string> split_csv_line(std::string_view line, const std::string& origin,
                                        std::size_t line_number)
{
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;
    bool was_quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == '"' && trim(field).empty()) {
            quoted = was_quoted = true;
            field.clear();
        } else if (c == ',') {
            fields.push_back(was_quoted ? field : std::string(trim(field)));
            field.clear();
            was_quoted = false;
        } else {
            field += c;
        }
    }
    if (quoted)
        fail(origin, "line " + std::to_string(line_number) + " has an unterminated quote");
    fields.push_back(was_quoted ? field : std::string(trim(field)));
    return fields;
}

std::optional<double> csv_number(const std::string& text, std::string_view column,
                                 const std::string& origin, const std::string& where)
{
    if (text.empty())
        return std::nullopt;
    double value = 0.0;
    const char* first = text.data();
    const char* last = text.data() + text.size();
    if (*first == '+')
        ++first;
    const auto [end, error] = std::from_chars(first, last, value);
    if (error != std::errc() || end != last)
        fail(origin, where + ": '" + std::string(column) + "' must be a number, not '" + text + "'");
    return value;
}

} // namespace

void validate_profile(const Profile& profile)
{
    const std::string origin = profile.source.empty() ? profile.name : profile.source;
    if (profile.layers.empty())
        fail(origin, "has no layers");
    for (std::size_t i = 0; i < profile.layers.size(); ++i) {
        const Layer& layer = profile.layers[i];
        const std::string where = "layer " + std::to_string(i) + " ('" + layer.name + "')";
        for (const double value :
             {layer.fwd_ms, layer.bwd_ms, layer.bwd_input_ms, layer.bwd_weight_ms})
            if (!std::isfinite(value) || value < 0.0)
                fail(origin, where + " has a negative or non-finite cost");
        if (layer.params < 0 || layer.activation_bytes < 0)
            fail(origin, where + " has a negative 'params' or 'activation_bytes'");
        if (!close_enough(layer.bwd_input_ms + layer.bwd_weight_ms, layer.bwd_ms))
            fail(origin, where + ": 'bwd_input_ms' + 'bwd_weight_ms' must equal 'bwd_ms'");
    }
}

Profile parse_profile_json(std::string_view text, const std::string& origin)
{
    nlohmann::json document;
    JsonLimits limits; // a linear SAX pass: refused before a DOM is built
    limits.max_depth = kMaxProfileDepth;
    if (const JsonScan scan = scan_json_limits(text, limits); !scan.violation.empty())
        fail(origin, scan.violation);
    try {
        document = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& error) {
        fail(origin, "is not valid JSON (byte " + std::to_string(error.byte) + ")");
    } catch (const nlohmann::json::exception& error) { // e.g. a number too large for a double
        std::string what = error.what();
        if (const auto pos = what.find("] "); pos != std::string::npos)
            what = what.substr(pos + 2);
        fail(origin, "is not valid JSON: " + what);
    }
    if (!document.is_object())
        fail(origin, "must be a JSON object with a 'layers' list");
    Profile profile;
    profile.source = origin;
    profile.name = file_stem(origin);
    if (const auto name = document.find("name"); name != document.end()) {
        if (!name->is_string())
            fail(origin, "'name' must be a string");
        profile.name = name->get<std::string>();
    }
    const auto tflops_it = document.find("device_tflops");
    const std::optional<double> device_tflops =
        tflops_it == document.end() ? std::nullopt : parse_tflops(*tflops_it, origin);

    const auto layers = document.find("layers");
    if (layers == document.end())
        fail(origin, "has no 'layers' list");
    if (!layers->is_array())
        fail(origin, "'layers' must be a list");
    if (layers->empty())
        fail(origin, "has no layers ('layers' is empty)");

    for (std::size_t i = 0; i < layers->size(); ++i) {
        const nlohmann::json& item = (*layers)[i];
        std::string where = "layer " + std::to_string(i);
        if (!item.is_object())
            fail(origin, where + " must be an object");
        RawLayer raw;
        if (const auto name = item.find("name"); name != item.end()) {
            if (!name->is_string())
                fail(origin, where + ": 'name' must be a string");
            raw.name = name->get<std::string>();
            where += " ('" + *raw.name + "')";
        }
        for (const auto& [key, value] : item.items()) {
            if (std::find(kKnownFields.begin(), kKnownFields.end(), key) == kKnownFields.end())
                fail(origin, where + " has an unknown field '" + key + "' (known: " +
                                 known_fields_text() + ")");
        }
        raw.params = json_number(item, "params", origin, where);
        raw.fwd_ms = json_number(item, "fwd_ms", origin, where);
        raw.fwd_flops = json_number(item, "fwd_flops", origin, where);
        raw.bwd_ms = json_number(item, "bwd_ms", origin, where);
        raw.bwd_input_ms = json_number(item, "bwd_input_ms", origin, where);
        raw.bwd_weight_ms = json_number(item, "bwd_weight_ms", origin, where);
        raw.activation_bytes = json_number(item, "activation_bytes", origin, where);
        profile.layers.push_back(finish_layer(raw, i, origin, {}, device_tflops));
    }
    return profile;
}

Profile parse_profile_csv(std::string_view text, const std::string& origin)
{
    Profile profile;
    profile.source = origin;
    profile.name = file_stem(origin);
    std::optional<double> device_tflops;
    std::vector<std::string> header;
    std::vector<RawLayer> raws;
    std::vector<std::size_t> raw_lines;

    std::size_t line_number = 0;
    std::size_t position = 0;
    while (position <= text.size()) {
        const std::size_t newline = text.find('\n', position);
        std::string_view line = text.substr(
            position, newline == std::string_view::npos ? std::string_view::npos : newline - position);
        position = newline == std::string_view::npos ? text.size() + 1 : newline + 1;
        ++line_number;
        if (line_number == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") // UTF-8 BOM from spreadsheets
            line.remove_prefix(3);
        line = trim(line);
        if (line.empty())
            continue;
        if (line.front() == '#') {
            // "# device_tflops=312": the CSV counterpart of the JSON field.
            std::string_view directive = trim(line.substr(1));
            if (directive.substr(0, 13) == "device_tflops") {
                directive = trim(directive.substr(13));
                if (directive.empty() || (directive.front() != '=' && directive.front() != ':'))
                    fail(origin, "line " + std::to_string(line_number) +
                                     ": write the directive as '# device_tflops=<TFLOP/s>'");
                const auto value = csv_number(std::string(trim(directive.substr(1))),
                                              "device_tflops", origin,
                                              "line " + std::to_string(line_number));
                device_tflops = parse_tflops(value ? nlohmann::json(*value) : nlohmann::json(),
                                             origin);
            }
            continue;
        }
        const auto fields = split_csv_line(line, origin, line_number);
        if (header.empty()) {
            header = fields;
            for (const std::string& column : header) {
                if (std::find(kKnownFields.begin(), kKnownFields.end(), column) ==
                    kKnownFields.end())
                    fail(origin, "bad CSV header: unknown column '" + column +
                                     "' (expected name,params,fwd_ms,bwd_ms,activation_bytes; "
                                     "optional: fwd_flops, bwd_input_ms, bwd_weight_ms)");
                if (std::count(header.begin(), header.end(), column) > 1)
                    fail(origin, "bad CSV header: column '" + column + "' appears twice");
            }
            for (std::string_view required : {"name", "params", "activation_bytes"})
                if (std::find(header.begin(), header.end(), required) == header.end())
                    fail(origin, "bad CSV header: no '" + std::string(required) +
                                     "' column (expected name,params,fwd_ms,bwd_ms,"
                                     "activation_bytes)");
            if (std::find(header.begin(), header.end(), "fwd_ms") == header.end() &&
                std::find(header.begin(), header.end(), "fwd_flops") == header.end())
                fail(origin, "bad CSV header: no 'fwd_ms' (or 'fwd_flops') column");
            continue;
        }
        const std::string where = "line " + std::to_string(line_number);
        if (fields.size() != header.size())
            fail(origin, where + " has " + std::to_string(fields.size()) + " fields, the header " +
                             std::to_string(header.size()));
        RawLayer raw;
        for (std::size_t c = 0; c < header.size(); ++c) {
            const std::string& column = header[c];
            if (column == "name") {
                if (!fields[c].empty())
                    raw.name = fields[c];
                continue;
            }
            const auto value = csv_number(fields[c], column, origin, where);
            if (column == "params") raw.params = value;
            else if (column == "fwd_ms") raw.fwd_ms = value;
            else if (column == "fwd_flops") raw.fwd_flops = value;
            else if (column == "bwd_ms") raw.bwd_ms = value;
            else if (column == "bwd_input_ms") raw.bwd_input_ms = value;
            else if (column == "bwd_weight_ms") raw.bwd_weight_ms = value;
            else if (column == "activation_bytes") raw.activation_bytes = value;
        }
        raws.push_back(std::move(raw));
        raw_lines.push_back(line_number);
    }
    if (header.empty())
        fail(origin, "is empty (no CSV header)");
    if (raws.empty())
        fail(origin, "has no layers (only a header)");
    // device_tflops may be given anywhere in the file, so layers are finished after reading all.
    for (std::size_t i = 0; i < raws.size(); ++i)
        profile.layers.push_back(finish_layer(
            raws[i], i, origin, "line " + std::to_string(raw_lines[i]) + ", ", device_tflops));
    return profile;
}

Profile load_profile(const std::string& path)
{
    // open(2) with O_NONBLOCK and a regular-file check rather than std::ifstream: a FIFO (or a
    // device) given as the profile must fail at once instead of blocking the reader forever.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        throw Error(ProblemKind::cannot_open,
                    "cannot read the profile " + path + ": " + std::strerror(errno), path);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        throw Error(ProblemKind::cannot_open, "cannot read the profile " + path + ": it is not a regular file",
                    path);
    if (static_cast<uint64_t>(st.st_size) > kMaxProfileBytes)
        throw Error(ProblemKind::invalid_profile,
                    "profile " + path + ": the file is " + std::to_string(st.st_size) +
                        " bytes, more than the limit of " + std::to_string(kMaxProfileBytes),
                    path);
    std::string content;
    char buffer[1 << 16];
    while (true) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw Error(ProblemKind::cannot_open,
                        "cannot read the profile " + path + ": " + std::strerror(errno), path);
        if (n == 0)
            break;
        content.append(buffer, static_cast<std::size_t>(n));
        if (content.size() > kMaxProfileBytes) // it grew while being read
            throw Error(ProblemKind::invalid_profile,
                        "profile " + path + ": more than the limit of " + std::to_string(kMaxProfileBytes) + " bytes",
                        path);
    }
    std::string extension = std::filesystem::path(path).extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return extension == ".csv" ? parse_profile_csv(content, path) : parse_profile_json(content, path);
}

Profile uniform_profile(int layer_count, double fwd_ms)
{
    if (layer_count < 1)
        throw Error(ProblemKind::invalid_argument, "a uniform profile needs at least one layer");
    Profile profile;
    profile.name = "uniform";
    profile.layers.reserve(static_cast<std::size_t>(layer_count));
    for (int i = 0; i < layer_count; ++i)
        profile.layers.push_back(Layer{"layer" + std::to_string(i), 1, fwd_ms, 2.0 * fwd_ms,
                                       fwd_ms, fwd_ms, 1});
    return profile;
}

} // namespace shardscope::pipeline
