// The CSV form of a layer profile (docs/shardctl.md, section 4): one layer a row under a header
// of layer keys, "# key=value" directives for the top-level fields.
#include "core/pipeline/profile.h"

#include "core/pipeline/internal/profile_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

namespace shardscope::pipeline {
namespace {

using detail::fail;
using detail::kKnownFields;
using detail::RawLayer;

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
std::vector<std::string> split_csv_line(std::string_view line, const std::string& origin, std::size_t line_number)
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

std::optional<double> csv_number(const std::string& text, std::string_view column, const std::string& origin,
                                 const std::string& where)
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

Profile parse_profile_csv(std::string_view text, const std::string& origin)
{
    Profile profile;
    profile.source = origin;
    profile.name = detail::file_stem(origin);
    detail::RawTop top;
    std::vector<std::string> header;
    std::vector<RawLayer> raws;
    std::vector<std::size_t> raw_lines;

    std::size_t line_number = 0;
    std::size_t position = 0;
    while (position <= text.size()) {
        const std::size_t newline = text.find('\n', position);
        std::string_view line =
            text.substr(position, newline == std::string_view::npos ? std::string_view::npos : newline - position);
        position = newline == std::string_view::npos ? text.size() + 1 : newline + 1;
        ++line_number;
        if (line_number == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") // UTF-8 BOM from spreadsheets
            line.remove_prefix(3);
        line = trim(line);
        if (line.empty())
            continue;
        if (line.front() == '#') {
            // "# device_tflops=312" (or seq_len, hidden_size, ...): the CSV counterpart of the
            // JSON top-level fields.
            const std::string_view directive = trim(line.substr(1));
            for (std::string_view key : detail::kTopFields) {
                if (directive.substr(0, key.size()) != key)
                    continue;
                const std::string_view rest = trim(directive.substr(key.size()));
                const bool assigns = !rest.empty() && (rest.front() == '=' || rest.front() == ':');
                if (!assigns && key != "device_tflops") // a comment that merely starts so
                    break;
                if (!assigns)
                    fail(origin,
                         "line " + std::to_string(line_number) +
                             ": write the directive as '# device_tflops=<TFLOP/s>'");
                const auto value =
                    csv_number(std::string(trim(rest.substr(1))), key, origin, "line " + std::to_string(line_number));
                if (!value)
                    fail(origin, "line " + std::to_string(line_number) + ": '" + std::string(key) + "' has no value");
                *detail::top_field(top, key) = value;
                break;
            }
            continue;
        }
        const auto fields = split_csv_line(line, origin, line_number);
        if (header.empty()) {
            header = fields;
            for (const std::string& column : header) {
                if (std::find(kKnownFields.begin(), kKnownFields.end(), column) == kKnownFields.end())
                    fail(origin,
                         "bad CSV header: unknown column '" + column +
                             "' (expected name,params,fwd_ms,bwd_ms,activation_bytes; "
                             "optional: fwd_flops, bwd_input_ms, bwd_weight_ms, "
                             "selective_activation_bytes, input_bytes, output_bytes, selective_recompute_ms)");
                if (std::count(header.begin(), header.end(), column) > 1)
                    fail(origin, "bad CSV header: column '" + column + "' appears twice");
            }
            for (std::string_view required : {"name", "params", "activation_bytes"})
                if (std::find(header.begin(), header.end(), required) == header.end())
                    fail(origin,
                         "bad CSV header: no '" + std::string(required) +
                             "' column (expected name,params,fwd_ms,bwd_ms,"
                             "activation_bytes)");
            if (std::find(header.begin(), header.end(), "fwd_ms") == header.end() &&
                std::find(header.begin(), header.end(), "fwd_flops") == header.end())
                fail(origin, "bad CSV header: no 'fwd_ms' (or 'fwd_flops') column");
            continue;
        }
        const std::string where = "line " + std::to_string(line_number);
        if (fields.size() != header.size())
            fail(origin,
                 where + " has " + std::to_string(fields.size()) + " fields, the header " +
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
            *detail::raw_field(raw, column) = value; // the header named only known columns
        }
        raws.push_back(std::move(raw));
        raw_lines.push_back(line_number);
    }
    if (header.empty())
        fail(origin, "is empty (no CSV header)");
    if (raws.empty())
        fail(origin, "has no layers (only a header)");
    // Directives may be given anywhere in the file, so layers are finished after reading all.
    detail::finish_top(top, origin, profile);
    for (std::size_t i = 0; i < raws.size(); ++i)
        profile.layers.push_back(
            detail::finish_layer(raws[i], i, origin, "line " + std::to_string(raw_lines[i]) + ", ", top.device_tflops));
    validate_profile(profile); // what holds of the layers together (their sums stay countable)
    return profile;
}

} // namespace shardscope::pipeline
