#pragma once
// Reading an object front to back for a consumer that must see its bytes in order (a digest).
// From a local disk one buffer is enough: the kernel reads ahead. From a server each range is a
// request that waits on the network longer than hashing its bytes takes, and one connection
// carries less than the server can send; so the next ranges are fetched on helper threads, each
// with its own connection, while the consumer works through the one before them. The buffers are
// reused: memory is `depth` × `chunk` whatever the object's size.

#include "core/storage/folder.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace shardscope::storage {

struct SequentialRead {
    std::size_t chunk = 0; // bytes a read
    // Buffers, each one read at a time: up to depth - 1 reads in flight while the consumer works
    // through one. 1 reads on the caller's thread, one chunk after another.
    int depth = 1;
};

// Where read_in_order stopped.
struct SequentialReadEnd {
    uint64_t done = 0; // bytes handed to the consumer
    bool failed = false; // the read at `done` failed (errno as the Reader left it)
};

// Hands `consume` bytes [0, size) of `reader` in order, a chunk at a time, until it returns false
// or a read fails. A remote read's Error is rethrown on the caller's thread; the helpers are
// stopped and joined before it returns or throws.
SequentialReadEnd read_in_order(const Reader& reader, uint64_t size, const SequentialRead& how,
                                const std::function<bool(const char* bytes, std::size_t n)>& consume);

// The depth that keeps `workers` objects read at once within kRemoteReadsAtOnce reads in all:
// one object read alone gets them all, eight objects one each.
inline int remote_read_depth(int workers)
{
    return workers >= kRemoteReadsAtOnce ? 1 : kRemoteReadsAtOnce / (workers > 0 ? workers : 1);
}

} // namespace shardscope::storage
