#pragma once
// Text from an untrusted file made safe to quote in an error message.

#include <string>
#include <string_view>

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

} // namespace shardscope
