#include "core/storage/sequential_read.h"

#include "core/util/cancel.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace shardscope::storage {

namespace {

// A stream whose consumer was busy less than 1/kWidenBelowBusy of the time from its first chunk
// to its kProbeChunks-th is widened.
constexpr int kWidenBelowBusy = 3;
constexpr uint64_t kProbeChunks = 8;

SequentialReadEnd read_one_at_a_time(const Reader& reader, uint64_t size, std::size_t chunk,
                                     const std::function<bool(const char*, std::size_t)>& consume)
{
    auto buffer = std::make_unique<char[]>(chunk);
    SequentialReadEnd end;
    while (end.done < size) {
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(chunk, size - end.done));
        if (!reader.read(buffer.get(), n, end.done)) {
            end.failed = true;
            return end;
        }
        const bool more = consume(buffer.get(), n);
        end.done += n;
        if (!more)
            break;
    }
    return end;
}

// Helper t fills slot t with chunks t, t + depth, t + 2 depth, …, each once the consumer has
// emptied the slot; the consumer takes chunk c from slot c % depth. So a slot always holds the
// chunk the consumer expects there, and no more than `depth` chunks are ever held.
class ReadAhead {
public:
    // Bytes [start, size).
    ReadAhead(const Reader& reader, uint64_t start, uint64_t size, std::size_t chunk, int depth)
        : m_reader(reader), m_start(start), m_size(size), m_chunk(chunk), m_slots(static_cast<std::size_t>(depth))
    {
        // Allocated here, on the caller's thread: freed into its malloc arena, they are reused by
        // the next object it reads, not left behind in the arena of a helper that is gone.
        for (Slot& slot : m_slots)
            slot.buffer = std::make_unique<char[]>(chunk);
        try {
            for (std::size_t t = 0; t < m_slots.size(); ++t)
                m_helpers.emplace_back([this, t, flags = t_operation_cancel] {
                    const CancelScope scope(flags); // the reader's operation's
                    fill(t);
                });
        } catch (...) { // no thread to be had: those started are stopped, not left running
            stop();
            throw;
        }
    }
    ~ReadAhead() { stop(); } // also when the consumer throws: no helper outlives the reader

    void stop()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_changed.notify_all();
        for (auto& helper : m_helpers)
            if (helper.joinable())
                helper.join();
    }

    SequentialReadEnd run(const std::function<bool(const char*, std::size_t)>& consume)
    {
        SequentialReadEnd end{.done = m_start};
        for (uint64_t c = 0; end.done < m_size; ++c) {
            Slot& slot = m_slots[c % m_slots.size()];
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait(lock, [&] { return slot.state != Slot::empty; });
            }
            if (slot.state == Slot::failed) {
                if (slot.error)
                    std::rethrow_exception(slot.error);
                errno = slot.error_number;
                end.failed = true;
                return end;
            }
            const bool more = consume(slot.buffer.get(), slot.bytes);
            end.done += slot.bytes;
            {
                std::lock_guard lock(m_mutex);
                slot.state = Slot::empty;
            }
            m_changed.notify_all();
            if (!more)
                break;
        }
        return end;
    }

private:
    struct Slot {
        enum State { empty, full, failed };
        std::unique_ptr<char[]> buffer;
        std::size_t bytes = 0;
        State state = empty;
        std::exception_ptr error; // a remote read's Error
        int error_number = 0; // a local read's errno
    };

    void fill(std::size_t t)
    {
        Slot& slot = m_slots[t];
        const uint64_t stride = m_chunk * m_slots.size();
        for (uint64_t at = m_start + m_chunk * t; at < m_size; at += stride) {
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait(lock, [&] { return m_stop || slot.state == Slot::empty; });
                if (m_stop)
                    return;
            }
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(m_chunk, m_size - at));
            Slot::State state = Slot::full;
            try {
                if (!m_reader.read(slot.buffer.get(), n, at)) {
                    slot.error_number = errno;
                    state = Slot::failed;
                }
            } catch (...) {
                slot.error = std::current_exception();
                state = Slot::failed;
            }
            {
                std::lock_guard lock(m_mutex);
                slot.bytes = n;
                slot.state = state;
            }
            m_changed.notify_all();
            if (state == Slot::failed)
                return;
        }
    }

    const Reader& m_reader;
    const uint64_t m_start, m_size;
    const std::size_t m_chunk;
    std::vector<Slot> m_slots;
    std::vector<std::thread> m_helpers;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    bool m_stop = false;
};

} // namespace

SequentialReadEnd read_in_order(const Reader& reader, uint64_t size, const SequentialRead& how,
                                const std::function<bool(const char* bytes, std::size_t n)>& consume)
{
    const uint64_t chunks = (size + how.chunk - 1) / how.chunk;
    const int depth = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(std::max(how.depth, 1)), chunks));
    if (depth <= 1) {
        if (const auto streamed = reader.stream(0, size, consume))
            return {.done = *streamed};
        return read_one_at_a_time(reader, size, how.chunk, consume);
    }
    // One stream first, watched: while the consumer is busy for a good part of the time, more
    // connections would only add requests and copies to the CPU it needs (a server on this host
    // or the LAN). Where it mostly waits on the connection (a WAN link to S3, whose connections
    // each carry a fraction of what the store can send) the rest is read ahead on `depth`.
    // Watched from its first chunk (the request's latency and the connection's slow start) to the
    // kProbeChunks-th.
    uint64_t start = 0;
    bool widen = false;
    std::chrono::steady_clock::time_point begun;
    std::chrono::steady_clock::duration busy{};
    const uint64_t from = how.chunk, to = kProbeChunks * static_cast<uint64_t>(how.chunk);
    const auto streamed = reader.stream(0, size, [&](const char* bytes, std::size_t n) {
        const auto before = std::chrono::steady_clock::now();
        const bool more = consume(bytes, n);
        const auto after = std::chrono::steady_clock::now();
        if (start < from && start + n >= from)
            begun = after;
        else if (start >= from)
            busy += after - before;
        const bool probed = start < to && start + n >= to;
        start += n;
        widen = more && probed && size - start > to && busy * kWidenBelowBusy < after - begun;
        return more && !widen;
    });
    if (!streamed) {
        ReadAhead ahead(reader, 0, size, how.chunk, depth);
        return ahead.run(consume);
    }
    if (!widen)
        return {.done = *streamed};
    ReadAhead ahead(reader, start, size, how.chunk, depth);
    return ahead.run(consume);
}

} // namespace shardscope::storage
