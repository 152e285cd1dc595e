#include "core/foreign/summary_json.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace shardscope {

namespace {

// Valid UTF-8 without overlongs or surrogates (what nlohmann's dump passes through unchanged).
bool valid_utf8(std::string_view s)
{
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t n = 0;
        uint32_t cp = 0;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else
            return false;
        for (std::size_t k = 1; k <= n; ++k) {
            if (i + k >= s.size())
                return false;
            const auto b = static_cast<unsigned char>(s[i + k]);
            if ((b & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (b & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

class Writer {
public:
    Writer(std::ostream& out, int indent) : m_out(out), m_indent(indent) { m_buffer.reserve(kFlushAt + 4096); }
    ~Writer() { flush(); }

    void raw(std::string_view s)
    {
        m_buffer.append(s);
        if (m_buffer.size() >= kFlushAt)
            flush();
    }
    void newline_indent(int depth)
    {
        m_buffer.push_back('\n');
        m_buffer.append(static_cast<std::size_t>(depth * m_indent), ' ');
    }
    void number(uint64_t v) { raw(std::to_string(v)); }
    void string(std::string_view s)
    {
        if (!valid_utf8(s)) { // nlohmann's own replacement of invalid bytes, exactly
            raw(nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            return;
        }
        m_buffer.push_back('"');
        for (const char ch : s) {
            const auto c = static_cast<unsigned char>(ch);
            switch (c) {
            case '"': m_buffer.append("\\\""); break;
            case '\\': m_buffer.append("\\\\"); break;
            case '\b': m_buffer.append("\\b"); break;
            case '\f': m_buffer.append("\\f"); break;
            case '\n': m_buffer.append("\\n"); break;
            case '\r': m_buffer.append("\\r"); break;
            case '\t': m_buffer.append("\\t"); break;
            default:
                if (c < 0x20) {
                    static const char* hex = "0123456789abcdef";
                    m_buffer.append("\\u00");
                    m_buffer.push_back(hex[c >> 4]);
                    m_buffer.push_back(hex[c & 15]);
                } else {
                    m_buffer.push_back(ch);
                }
            }
        }
        m_buffer.push_back('"');
    }
    // One "key": value member of an object at `depth`; `first` for the first member.
    void key(std::string_view k, int depth, bool& first)
    {
        if (!first)
            m_buffer.push_back(',');
        first = false;
        newline_indent(depth);
        string(k);
        m_buffer.append(": ");
    }
    void numbers(std::span<const uint64_t> values, int depth)
    {
        if (values.empty())
            return raw("[]");
        m_buffer.push_back('[');
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i)
                m_buffer.push_back(',');
            newline_indent(depth + 1);
            number(values[i]);
        }
        newline_indent(depth);
        m_buffer.push_back(']');
    }
    void flush()
    {
        m_out.write(m_buffer.data(), static_cast<std::streamsize>(m_buffer.size()));
        m_buffer.clear();
    }

private:
    static constexpr std::size_t kFlushAt = 1 << 16;
    std::ostream& m_out;
    int m_indent;
    std::string m_buffer;
};

// Keys in the order nlohmann's std::map sorts them: bytes, chunks, detail, dtype, file, name,
// offset, shape (and offsets, sizes, storage; file, length, offset).
void write_chunk(Writer& w, const ForeignChunkView& c, int depth)
{
    w.raw("{");
    bool first = true;
    w.key("offsets", depth + 1, first);
    w.numbers(c.offsets, depth + 1);
    w.key("sizes", depth + 1, first);
    w.numbers(c.sizes, depth + 1);
    if (!c.file.empty()) {
        w.key("storage", depth + 1, first);
        w.raw("{");
        bool inner = true;
        w.key("file", depth + 2, inner);
        w.string(c.file);
        w.key("length", depth + 2, inner);
        w.number(c.length);
        w.key("offset", depth + 2, inner);
        w.number(c.offset);
        w.newline_indent(depth + 1);
        w.raw("}");
    }
    w.newline_indent(depth);
    w.raw("}");
}

void write_tensor(Writer& w, const ForeignTensorView& t, int depth)
{
    w.raw("{");
    bool first = true;
    w.key("bytes", depth + 1, first);
    w.number(t.bytes);
    if (!t.chunks.empty()) {
        w.key("chunks", depth + 1, first);
        w.raw("[");
        for (std::size_t i = 0; i < t.chunks.size(); ++i) {
            if (i)
                w.raw(",");
            w.newline_indent(depth + 2);
            write_chunk(w, t.chunks[i], depth + 2);
        }
        w.newline_indent(depth + 1);
        w.raw("]");
    }
    if (!t.detail.empty()) {
        w.key("detail", depth + 1, first);
        w.string(t.detail);
    }
    w.key("dtype", depth + 1, first);
    w.string(t.dtype);
    if (!t.file.empty()) {
        w.key("file", depth + 1, first);
        w.string(t.file);
    }
    w.key("name", depth + 1, first);
    w.string(t.name);
    if (!t.file.empty()) {
        w.key("offset", depth + 1, first);
        w.number(t.offset);
    }
    w.key("shape", depth + 1, first);
    w.numbers(t.shape, depth + 1);
    w.newline_indent(depth);
    w.raw("}");
}

} // namespace

void write_tensors_json(std::ostream& out, const ForeignTensorList& tensors, int indent, int depth)
{
    Writer w(out, indent);
    if (tensors.empty())
        return w.raw("[]");
    w.raw("[");
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (i)
            w.raw(",");
        w.newline_indent(depth + 1);
        write_tensor(w, tensors[i], depth + 1);
    }
    w.newline_indent(depth);
    w.raw("]");
}

} // namespace shardscope
