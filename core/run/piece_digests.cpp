#include "core/run/internal/piece_digests.h"

#include "core/util/md5_lanes.h"

#include <algorithm>
#include <stdexcept>

namespace shardscope {

namespace {
constexpr std::size_t kChunk = 256 << 10; // read of each piece at a time
}

PieceDigests::PieceDigests(std::vector<uint64_t> sizes, Open open)
    : m_sizes(std::move(sizes)), m_open(std::move(open)), m_digests(m_sizes.size()), m_thread([this] { run(); })
{}

PieceDigests::~PieceDigests()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_changed.notify_all();
    m_thread.join();
}

Md5Digest PieceDigests::get(std::size_t j)
{
    if (j >= m_sizes.size())
        throw std::out_of_range("PieceDigests::get: no such piece");
    std::unique_lock lock(m_mutex);
    m_wanted = std::max(m_wanted, j + 1);
    m_changed.notify_all();
    m_changed.wait(lock, [&] { return m_done > j || m_error; });
    if (m_done > j)
        return m_digests[j];
    std::rethrow_exception(m_error);
}

void PieceDigests::check()
{
    std::lock_guard lock(m_mutex);
    if (m_error)
        std::rethrow_exception(m_error);
}

void PieceDigests::run()
{
    try {
        std::vector<std::byte> buffer(Md5Lanes::kLanes * kChunk);
        Md5Lanes md5;
        for (std::size_t first = 0; first < m_sizes.size(); first += Md5Lanes::kLanes) {
            const std::size_t n = std::min(Md5Lanes::kLanes, m_sizes.size() - first);
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait(lock, [&] { return m_stop || first + n <= m_wanted + kLead; });
                if (m_stop)
                    return;
            }
            std::vector<Read> pieces;
            for (std::size_t i = 0; i < n; ++i)
                pieces.push_back(m_open(first + i));
            std::vector<std::span<const std::byte>> spans(n);
            for (uint64_t at = 0;; at += kChunk) {
                bool more = false;
                for (std::size_t i = 0; i < n; ++i) {
                    const uint64_t size = m_sizes[first + i];
                    const auto len = static_cast<std::size_t>(at < size ? std::min<uint64_t>(kChunk, size - at) : 0);
                    const std::span<std::byte> into(buffer.data() + i * kChunk, len);
                    if (len)
                        pieces[i](at, into);
                    spans[i] = into;
                    more = more || len;
                }
                if (m_stop)
                    return; // the upload is over: a half-read piece's digest is not published
                if (!more)
                    break;
                md5.update(spans);
            }
            const auto digests = md5.finish();
            std::lock_guard lock(m_mutex);
            std::copy_n(digests.begin(), n, m_digests.begin() + static_cast<std::ptrdiff_t>(first));
            m_done = first + n;
            m_changed.notify_all();
        }
    } catch (...) {
        std::lock_guard lock(m_mutex);
        m_error = std::current_exception();
        m_changed.notify_all();
    }
}

} // namespace shardscope
