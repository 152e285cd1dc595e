#pragma once
// Text for people: quoting an untrusted file safely in an error message, and byte counts.

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

// Length of the well-formed UTF-8 sequence at the start of `text` (no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when it does not start with one.
inline std::size_t utf8_sequence_length(std::string_view text)
{
    const auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = at(0);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xbf; // the allowed range of the second byte
    if (lead >= 0xc2 && lead <= 0xdf)
        length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        low = lead == 0xe0 ? 0xa0 : 0x80;
        high = lead == 0xed ? 0x9f : 0xbf;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        low = lead == 0xf0 ? 0x90 : 0x80;
        high = lead == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if (text.size() < length || at(1) < low || at(1) > high)
        return 0;
    for (std::size_t i = 2; i < length; ++i)
        if (at(i) < 0x80 || at(i) > 0xbf)
            return 0;
    return length;
}

// True when `tail` is the start of a well-formed sequence that was cut short.
inline bool utf8_prefix(std::string_view tail)
{
    const auto lead = static_cast<unsigned char>(tail[0]);
    const std::size_t length = lead >= 0xc2 && lead <= 0xdf ? 2
        : lead >= 0xe0 && lead <= 0xef                      ? 3
        : lead >= 0xf0 && lead <= 0xf4                      ? 4
                                                            : 0;
    if (length == 0 || tail.size() >= length)
        return false;
    for (std::size_t i = 1; i < tail.size(); ++i)
        if (static_cast<unsigned char>(tail[i]) < 0x80 || static_cast<unsigned char>(tail[i]) > 0xbf)
            return false;
    return true;
}

// Text from a file made safe to print: valid UTF-8 passes, everything else becomes \xNN — control
// bytes (a terminal escape, a NUL, a newline), the C1 controls U+0080..U+009F (which terminals
// also obey) and bytes that are not UTF-8 — and more than `max_bytes` is cut with "...", so a
// hostile name can neither rewrite the user's terminal nor turn one error sentence into megabytes.
inline std::string printable(std::string_view text, std::size_t max_bytes = 200)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    const bool cut = text.size() > max_bytes;
    if (cut)
        text = text.substr(0, max_bytes);
    std::string out;
    out.reserve(text.size() + 3);
    auto escape = [&](unsigned char byte) {
        out += "\\x";
        out += kDigits[byte >> 4];
        out += kDigits[byte & 15];
    };
    for (std::size_t i = 0; i < text.size();) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x80) {
            if (byte < 0x20 || byte == 0x7f)
                escape(byte);
            else
                out += text[i];
            ++i;
            continue;
        }
        const std::size_t length = utf8_sequence_length(text.substr(i));
        if (length == 0 && cut && utf8_prefix(text.substr(i))) // a character the cut split: drop its start
            break;
        if (length == 0 || (byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0)) {
            const std::size_t n = length == 0 ? 1 : length; // an invalid byte, or a C1 control's two
            for (std::size_t k = 0; k < n; ++k)
                escape(static_cast<unsigned char>(text[i + k]));
            i += n;
            continue;
        }
        out.append(text.substr(i, length));
        i += length;
    }
    if (cut)
        out += "...";
    return out;
}

// 1536 -> "1.5 KiB": binary units, one decimal above bytes.
inline std::string human_bytes(uint64_t bytes)
{
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 5) {
        value /= 1024.0;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit ? "%.1f %s" : "%.0f %s", value, units[unit]);
    return text;
}

// {4000, 64} -> "[4000, 64]": a shape or an offset vector in messages.
inline std::string join_dims(std::span<const uint64_t> dims)
{
    std::string out = "[";
    for (std::size_t d = 0; d < dims.size(); ++d)
        out += (d ? ", " : "") + std::to_string(dims[d]);
    return out + "]";
}

} // namespace shardscope
