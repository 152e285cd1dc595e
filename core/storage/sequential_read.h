#pragma once
// Reading an object front to back for a consumer that must see its bytes in order (a digest).
// From a local disk one buffer is enough: the kernel reads ahead. From a server the object comes
// in one request, each piece handed to the consumer as it arrives: the connection never idles
// and the server answers one request, not one a chunk (on loopback, verifying a 1 GiB object took
// 1.1 s so against 1.6 s in ranges on eight connections). Where one connection carries much less
// than the consumer could take (a WAN link to S3), the rest is read in ranges on helper threads,
// each with its own connection, while the consumer works through the one before them; their
// buffers are reused: memory is `depth` × `chunk` whatever the object's size.

#include "core/storage/folder.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace shardscope::storage {

struct SequentialRead {
    std::size_t chunk = 0; // bytes a read
    // Buffers, each one read at a time: up to depth - 1 reads in flight while the consumer works
    // through one. 1 reads on the caller's thread: a local file one chunk after another, a remote
    // object as one stream. Above 1, a remote object is streamed first and widened to `depth`
    // connections when the consumer is seen waiting on the one.
    int depth = 1;
};

// Where read_in_order stopped.
struct SequentialReadEnd {
    uint64_t done = 0; // bytes handed to the consumer
    bool failed = false; // the read at `done` failed (errno as the Reader left it)
};

// Hands `consume` bytes [0, size) of `reader` in order (a local file a chunk at a time, a remote
// object as its bytes arrive), until it returns false or a read fails. A remote read's Error is rethrown on the caller's thread; the helpers are
// stopped and joined before it returns or throws.
SequentialReadEnd read_in_order(const Reader& reader, uint64_t size, const SequentialRead& how,
                                const std::function<bool(const char* bytes, std::size_t n)>& consume);

// The depth of each of `workers` objects read at once: an object read alone may widen to
// kRemoteReadsAtOnce connections; several at once are one stream each. (Widened, several streams
// that share a loaded server all look slow to their consumers, and more connections only add
// requests and buffers: verifying four 256 MiB objects from a loopback gateway held 93 MiB
// instead of 23, no faster.)
inline int remote_read_depth(int workers)
{
    return workers <= 1 ? kRemoteReadsAtOnce : 1;
}

} // namespace shardscope::storage
