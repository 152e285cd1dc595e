#pragma once
// The input of the restricted pickle machine (pickle_machine.h), also skimmed on its own by the DCP
// reader's first pass over a .metadata.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace shardscope {

// The bytes the machine reads: all in memory, or a file read through a window, so that a large
// DCP .metadata need not be resident while it is decoded. A view take() returns lasts until the
// next take() for a file; for bytes in memory, as long as they do.
class PickleInput {
public:
    // Reads `size` bytes at `offset` into `buffer`; false when it cannot (an I/O error, or the
    // file shrank).
    using ReadAt = std::function<bool(void* buffer, std::size_t size, uint64_t offset)>;

    explicit PickleInput(std::string_view all) : m_size(all.size()), m_window(all) {}
    PickleInput(ReadAt read, uint64_t size) : m_size(size), m_read(std::move(read)) {}

    uint64_t size() const { return m_size; }
    uint64_t pos() const { return m_pos; }
    uint64_t left() const { return m_size - m_pos; }
    // The next `n` bytes (n <= left()), consumed; nullopt when the file could not be read.
    std::optional<std::string_view> take(uint64_t n)
    {
        if (m_pos + n <= m_window_at + m_window.size()) [[likely]] {
            const std::string_view out(m_window.data() + (m_pos - m_window_at), static_cast<std::size_t>(n));
            m_pos += n;
            return out;
        }
        auto out = peek(n);
        if (out)
            m_pos += n;
        return out;
    }
    // Moves past `n` bytes (n <= left()) without reading those not at hand yet.
    bool skip(uint64_t n)
    {
        m_pos += n;
        return true;
    }
    // The bytes read ahead of the position, without reading more (none after a skip past them):
    // valid until the next peek or take.
    std::string_view at_hand() const
    {
        const uint64_t end = m_window_at + m_window.size();
        return m_pos < end ? m_window.substr(static_cast<std::size_t>(m_pos - m_window_at)) : std::string_view();
    }
    // The same without consuming them.
    std::optional<std::string_view> peek(uint64_t n)
    {
        if (m_pos + n > m_window_at + m_window.size() && !fill(n))
            return std::nullopt;
        return m_window.substr(static_cast<std::size_t>(m_pos - m_window_at), static_cast<std::size_t>(n));
    }

private:
    static constexpr std::size_t kWindow = 1u << 20;
    // Keeps the unread bytes and reads on, at least `n` of them (a str longer than the window
    // gets a buffer of its own length, which the limits bound).
    bool fill(uint64_t n)
    {
        if (!m_read)
            return false;
        const uint64_t end = m_window_at + m_window.size();
        const auto keep = static_cast<std::size_t>(m_pos < end ? end - m_pos : 0); // 0 after a skip past it
        const auto want = static_cast<std::size_t>(std::min<uint64_t>(left(), std::max<uint64_t>(n, kWindow)));
        if (m_buffer.size() < want)
            m_buffer.resize(want);
        std::memmove(m_buffer.data(), m_buffer.data() + (m_window.size() - keep), keep);
        if (!m_read(m_buffer.data() + keep, want - keep, m_pos + keep))
            return false;
        m_window_at = m_pos;
        m_window = std::string_view(m_buffer.data(), want);
        return true;
    }

    uint64_t m_size = 0;
    uint64_t m_pos = 0;
    uint64_t m_window_at = 0; // where m_window starts in the input
    std::string_view m_window; // the bytes at hand: all of them, or m_buffer's
    std::string m_buffer;
    ReadAt m_read;
};

} // namespace shardscope
