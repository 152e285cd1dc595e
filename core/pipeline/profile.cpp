#include "core/pipeline/profile.h"

#include "core/util/error.h"
#include "core/util/internal/json_limits.h"

#include <nlohmann/json.hpp>

#include "core/pipeline/internal/profile_parse.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <tuple>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardscope::pipeline {
namespace detail {

std::optional<double>* raw_field(RawLayer& raw, std::string_view key)
{
    if (key == "params")
        return &raw.params;
    if (key == "fwd_ms")
        return &raw.fwd_ms;
    if (key == "fwd_flops")
        return &raw.fwd_flops;
    if (key == "bwd_ms")
        return &raw.bwd_ms;
    if (key == "bwd_input_ms")
        return &raw.bwd_input_ms;
    if (key == "bwd_weight_ms")
        return &raw.bwd_weight_ms;
    if (key == "activation_bytes")
        return &raw.activation_bytes;
    if (key == "selective_activation_bytes")
        return &raw.selective_activation_bytes;
    if (key == "input_bytes")
        return &raw.input_bytes;
    if (key == "output_bytes")
        return &raw.output_bytes;
    if (key == "selective_recompute_ms")
        return &raw.selective_recompute_ms;
    return nullptr;
}

std::optional<double>* top_field(RawTop& top, std::string_view key)
{
    if (key == "device_tflops")
        return &top.device_tflops;
    if (key == "seq_len")
        return &top.seq_len;
    if (key == "hidden_size")
        return &top.hidden_size;
    if (key == "attention_heads")
        return &top.attention_heads;
    if (key == "micro_batch_size")
        return &top.micro_batch_size;
    return nullptr;
}

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

void fail(const std::string& origin, const std::string& what)
{
    throw Error(ProblemKind::invalid_profile, "profile " + origin + ": " + what, origin);
}

} // namespace detail

namespace {

using detail::fail;
using detail::kKnownFields;
using detail::known_fields_text;
using detail::RawLayer;

// Relative tolerance used when a profile gives bwd_ms and both halves: measured numbers are
// printed rounded, so an exact equality test would reject honest files.
bool close_enough(double a, double b)
{
    return std::fabs(a - b) <= 1e-6 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

std::int64_t to_count(double value, const std::string& origin, const std::string& where, std::string_view field)
{
    // 2^63 is exactly representable; anything at or above it does not fit an int64.
    if (value != std::floor(value) || value >= 9.2233720368547758e18)
        fail(origin,
             where + ": '" + std::string(field) + "' must be a whole number that fits 64 bits, not " +
                 std::to_string(value));
    return static_cast<std::int64_t>(value);
}

// A positive whole number that fits an int (the model shape, the micro batch size).
int to_positive_int(double value, const std::string& origin, std::string_view field)
{
    if (!std::isfinite(value) || value != std::floor(value) || value < 1 || value > 1 << 30)
        fail(origin,
             "'" + std::string(field) + "' must be a whole number from 1 to 2^30, not " + std::to_string(value));
    return static_cast<int>(value);
}

} // namespace

namespace detail {

Layer finish_layer(const RawLayer& raw, std::size_t index, const std::string& origin, const std::string& where_prefix,
                   std::optional<double> device_tflops)
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
            fail(origin,
                 where + ": '" + std::string(key) + "' must be a finite number >= 0, not " + std::to_string(*value));
    };
    check(raw.params, "params");
    check(raw.fwd_ms, "fwd_ms");
    check(raw.fwd_flops, "fwd_flops");
    check(raw.bwd_ms, "bwd_ms");
    check(raw.bwd_input_ms, "bwd_input_ms");
    check(raw.bwd_weight_ms, "bwd_weight_ms");
    check(raw.activation_bytes, "activation_bytes");
    check(raw.selective_activation_bytes, "selective_activation_bytes");
    check(raw.input_bytes, "input_bytes");
    check(raw.output_bytes, "output_bytes");
    check(raw.selective_recompute_ms, "selective_recompute_ms");

    Layer layer;
    layer.name = *raw.name;
    layer.params = to_count(*raw.params, origin, where, "params");
    layer.activation_bytes = to_count(*raw.activation_bytes, origin, where, "activation_bytes");
    // What recomputation keeps is part of what the layer holds without it; more would mean
    // recomputing costs memory, which is a typo rather than a model.
    for (const auto& [value, key, target] :
         {std::tuple{raw.selective_activation_bytes, "selective_activation_bytes", &layer.selective_activation_bytes},
          std::tuple{raw.input_bytes, "input_bytes", &layer.input_bytes}}) {
        if (!value)
            continue;
        *target = to_count(*value, origin, where, key);
        if (**target > layer.activation_bytes)
            fail(origin,
                 where + ": '" + std::string(key) + "' (" + std::to_string(**target) +
                     ") is more than 'activation_bytes' (" + std::to_string(layer.activation_bytes) + ")");
    }
    if (raw.output_bytes)
        layer.output_bytes = to_count(*raw.output_bytes, origin, where, "output_bytes");
    if (raw.fwd_ms) {
        layer.fwd_ms = *raw.fwd_ms;
    } else {
        if (!device_tflops)
            fail(origin,
                 where +
                     " gives 'fwd_flops' but the profile has no 'device_tflops' to "
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
                fail(origin,
                     where + ": '" + std::string(raw.bwd_input_ms ? "bwd_input_ms" : "bwd_weight_ms") +
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
        fail(origin,
             where +
                 " gives only one of 'bwd_input_ms' / 'bwd_weight_ms'; give both, or "
                 "'bwd_ms' as well");
    } else {
        layer.bwd_ms = 2.0 * layer.fwd_ms;
        layer.bwd_input_ms = layer.fwd_ms;
        layer.bwd_weight_ms = layer.fwd_ms;
    }
    if (!std::isfinite(layer.fwd_ms) || !std::isfinite(layer.bwd_ms))
        fail(origin, where + ": its costs overflow");
    layer.selective_recompute_ms = raw.selective_recompute_ms;
    return layer;
}

void finish_top(const RawTop& top, const std::string& origin, Profile& profile)
{
    if (top.device_tflops && (!std::isfinite(*top.device_tflops) || !(*top.device_tflops > 0.0)))
        fail(origin, "'device_tflops' must be a number > 0");
    const int given =
        int(top.seq_len.has_value()) + int(top.hidden_size.has_value()) + int(top.attention_heads.has_value());
    // Half a shape would make the attention term silently 0 for a model that has one.
    if (given != 0 && given != 3)
        fail(origin,
             "gives only some of 'seq_len', 'hidden_size', 'attention_heads'; give all "
             "three (the model shape) or none");
    if (given == 3)
        profile.shape = ModelShape{.seq_len = to_positive_int(*top.seq_len, origin, "seq_len"),
                                   .hidden_size = to_positive_int(*top.hidden_size, origin, "hidden_size"),
                                   .attention_heads = to_positive_int(*top.attention_heads, origin, "attention_heads")};
    if (top.micro_batch_size)
        profile.micro_batch_size = to_positive_int(*top.micro_batch_size, origin, "micro_batch_size");
}

std::string file_stem(const std::string& origin)
{
    const std::string stem = std::filesystem::path(origin).stem().string();
    return stem.empty() ? std::string("profile") : stem;
}

} // namespace detail

namespace {

std::optional<double> json_number(const nlohmann::json& object, std::string_view key, const std::string& origin,
                                  const std::string& where)
{
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        return std::nullopt;
    if (!it->is_number())
        fail(origin,
             where + "'" + std::string(key) + "' must be a number, not " + std::string(it->type_name()) + " " +
                 it->dump());
    return it->get<double>();
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
        for (const double value : {layer.fwd_ms, layer.bwd_ms, layer.bwd_input_ms, layer.bwd_weight_ms})
            if (!std::isfinite(value) || value < 0.0)
                fail(origin, where + " has a negative or non-finite cost");
        if (layer.params < 0 || layer.activation_bytes < 0)
            fail(origin, where + " has a negative 'params' or 'activation_bytes'");
        if (!close_enough(layer.bwd_input_ms + layer.bwd_weight_ms, layer.bwd_ms))
            fail(origin, where + ": 'bwd_input_ms' + 'bwd_weight_ms' must equal 'bwd_ms'");
        for (const auto& held : {layer.selective_activation_bytes, layer.input_bytes})
            if (held && (*held < 0 || *held > layer.activation_bytes))
                fail(origin,
                     where +
                         " keeps more bytes under recomputation than "
                         "'activation_bytes', or a negative number");
        if (layer.output_bytes && *layer.output_bytes < 0)
            fail(origin, where + " has a negative 'output_bytes'");
    }
    // A stage's sums of these must stay countable in 64 bits (the memory of 16 bytes a parameter).
    constexpr std::int64_t kMaxTotal = std::int64_t(1) << 57;
    std::int64_t params = 0, activations = 0;
    for (const Layer& layer : profile.layers)
        if (__builtin_add_overflow(params, layer.params, &params) || params > kMaxTotal ||
            __builtin_add_overflow(activations, layer.activation_bytes, &activations) || activations > kMaxTotal)
            fail(origin,
                 "its layers' 'params' or 'activation_bytes' add up to more than 2^57, too many to count "
                 "bytes of");
    if (profile.shape &&
        (profile.shape->seq_len < 1 || profile.shape->hidden_size < 1 || profile.shape->attention_heads < 1))
        fail(origin, "the model shape (seq_len, hidden_size, attention_heads) must be > 0");
    if (profile.micro_batch_size && *profile.micro_batch_size < 1)
        fail(origin, "'micro_batch_size' must be > 0");
}

double attention_term(const Profile& profile)
{
    if (!profile.shape)
        return 0.0;
    const ModelShape& m = *profile.shape;
    return 5.0 * m.attention_heads * m.seq_len / m.hidden_size;
}

namespace {

// activation_bytes * part / (34 + 5as/h), rounded to the nearest byte.
std::int64_t korthikanti_part(const Profile& profile, const Layer& layer, double part)
{
    return std::llround(static_cast<double>(layer.activation_bytes) * part / (34.0 + attention_term(profile)));
}

} // namespace

std::int64_t layer_selective_bytes(const Profile& profile, const Layer& layer)
{
    return layer.selective_activation_bytes ? *layer.selective_activation_bytes
                                            : korthikanti_part(profile, layer, 34.0);
}

std::int64_t layer_output_bytes(const Profile& profile, const Layer& layer)
{
    return layer.output_bytes ? *layer.output_bytes : korthikanti_part(profile, layer, 2.0);
}

std::int64_t layer_input_bytes(const Profile& profile, const Layer& layer)
{
    // Clamped: a given output_bytes may exceed activation_bytes (fp32 logits), an input may not.
    return layer.input_bytes ? *layer.input_bytes
                             : std::min(layer.activation_bytes, layer_output_bytes(profile, layer));
}

double layer_selective_recompute_ms(const Profile& profile, const Layer& layer)
{
    if (layer.selective_recompute_ms)
        return *layer.selective_recompute_ms;
    if (!profile.shape)
        return 0.0;
    const double s = profile.shape->seq_len, h = profile.shape->hidden_size;
    return layer.fwd_ms * s / (6.0 * h + s);
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
    profile.name = detail::file_stem(origin);
    if (const auto name = document.find("name"); name != document.end()) {
        if (!name->is_string())
            fail(origin, "'name' must be a string");
        profile.name = name->get<std::string>();
    }
    detail::RawTop top;
    for (std::string_view key : detail::kTopFields)
        *detail::top_field(top, key) = json_number(document, key, origin, {});
    detail::finish_top(top, origin, profile);

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
                fail(origin, where + " has an unknown field '" + key + "' (known: " + known_fields_text() + ")");
        }
        for (std::string_view key : kKnownFields)
            if (std::optional<double>* field = detail::raw_field(raw, key))
                *field = json_number(item, key, origin, where + ": ");
        profile.layers.push_back(detail::finish_layer(raw, i, origin, {}, top.device_tflops));
    }
    validate_profile(profile); // what holds of the layers together (their sums stay countable)
    return profile;
}

std::string read_input_file(const std::string& path, std::uint64_t max_bytes, std::string_view what,
                            ProblemKind too_large)
{
    const std::string name(what);
    // open(2) with O_NONBLOCK and a regular-file check rather than std::ifstream: a FIFO (or a
    // device) given as the file must fail at once instead of blocking the reader forever.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        throw Error(ProblemKind::cannot_open, "cannot read the " + name + " " + path + ": " + std::strerror(errno),
                    path);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        throw Error(ProblemKind::cannot_open, "cannot read the " + name + " " + path + ": it is not a regular file",
                    path);
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
        throw Error(too_large,
                    "the " + name + " " + path + " is " + std::to_string(st.st_size) +
                        " bytes, more than the limit of " + std::to_string(max_bytes),
                    path);
    std::string content;
    content.reserve(static_cast<std::size_t>(st.st_size));
    std::vector<char> buffer(1 << 20);
    while (true) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw Error(ProblemKind::cannot_open, "cannot read the " + name + " " + path + ": " + std::strerror(errno),
                        path);
        if (n == 0)
            break;
        content.append(buffer.data(), static_cast<std::size_t>(n));
        if (content.size() > max_bytes) // it grew while being read
            throw Error(too_large,
                        "the " + name + " " + path + " is more than the limit of " + std::to_string(max_bytes) +
                            " bytes",
                        path);
    }
    return content;
}

Profile load_profile(const std::string& path)
{
    const std::string content = read_input_file(path, kMaxProfileBytes, "profile", ProblemKind::invalid_profile);
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
        profile.layers.push_back(Layer{"layer" + std::to_string(i), 1, fwd_ms, 2.0 * fwd_ms, fwd_ms, fwd_ms, 1});
    return profile;
}

} // namespace shardscope::pipeline
