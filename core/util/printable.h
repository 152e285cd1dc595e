#pragma once
// Text for people: quoting an untrusted file safely in an error message, and byte counts.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

// Control bytes (a terminal escape, a NUL, a newline) become \xNN, and more than `max_bytes` is
// cut with "...", so a hostile name can neither rewrite the user's terminal nor turn one error
// sentence into megabytes.
inline std::string printable(std::string_view text, std::size_t max_bytes = 200)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    const bool cut = text.size() > max_bytes;
    if (cut)
        text = text.substr(0, max_bytes);
    std::string out;
    out.reserve(text.size() + 3);
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) {
            out += "\\x";
            out += kDigits[byte >> 4];
            out += kDigits[byte & 15];
        } else {
            out += c;
        }
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
inline std::string join_dims(const std::vector<uint64_t>& dims)
{
    std::string out = "[";
    for (std::size_t d = 0; d < dims.size(); ++d)
        out += (d ? ", " : "") + std::to_string(dims[d]);
    return out + "]";
}

} // namespace shardscope
