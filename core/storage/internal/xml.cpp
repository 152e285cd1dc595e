#include "core/storage/internal/xml.h"

#include <charconv>

namespace shardscope::storage {

namespace {

void append_utf8(std::string& out, uint32_t cp)
{
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xc0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += char(0xe0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    } else {
        out += char(0xf0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3f));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    }
}

std::optional<std::string> decoded(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '&') {
            out += text[i];
            continue;
        }
        const std::size_t end = text.find(';', i);
        if (end == std::string_view::npos || end - i > 12)
            return std::nullopt;
        const std::string_view name = text.substr(i + 1, end - i - 1);
        if (name == "lt")
            out += '<';
        else if (name == "gt")
            out += '>';
        else if (name == "amp")
            out += '&';
        else if (name == "quot")
            out += '"';
        else if (name == "apos")
            out += '\'';
        else if (name.size() > 1 && name[0] == '#') {
            const bool hexa = name[1] == 'x';
            const std::string_view digits = name.substr(hexa ? 2 : 1);
            uint32_t cp = 0;
            const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hexa ? 16 : 10);
            if (ec != std::errc() || p != digits.data() + digits.size() || cp == 0 || cp > 0x10ffff ||
                (cp >= 0xd800 && cp <= 0xdfff))
                return std::nullopt;
            append_utf8(out, cp);
        } else {
            return std::nullopt;
        }
        i = end;
    }
    return out;
}

} // namespace

bool xml_acceptable(std::string_view document)
{
    return document.find("<!DOCTYPE") == std::string_view::npos && document.find("<!ENTITY") == std::string_view::npos;
}

std::vector<std::string_view> xml_elements(std::string_view document, std::string_view tag)
{
    std::vector<std::string_view> out;
    const std::string open = "<" + std::string(tag);
    const std::string close = "</" + std::string(tag) + ">";
    std::size_t at = 0;
    while ((at = document.find(open, at)) != std::string_view::npos) {
        const std::size_t after = at + open.size();
        if (after >= document.size())
            break;
        const char next = document[after];
        if (next != '>' && next != ' ' && next != '/') { // <KeyCount> is not <Key>
            at = after;
            continue;
        }
        const std::size_t gt = document.find('>', after);
        if (gt == std::string_view::npos)
            break;
        if (document[gt - 1] == '/') { // <Tag/>: empty
            out.emplace_back();
            at = gt + 1;
            continue;
        }
        const std::size_t end = document.find(close, gt + 1);
        if (end == std::string_view::npos)
            break;
        out.push_back(document.substr(gt + 1, end - gt - 1));
        at = end + close.size();
    }
    return out;
}

std::optional<std::string> xml_text(std::string_view document, std::string_view tag)
{
    const auto elements = xml_elements(document, tag);
    if (elements.empty())
        return std::nullopt;
    return decoded(elements.front());
}

} // namespace shardscope::storage
