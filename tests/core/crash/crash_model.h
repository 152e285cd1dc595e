#pragma once
// What a power cut may leave on disk, simulated (docs/reliability.md, "Persistence model").
//
// CrashRecorder snapshots a directory tree, taken as durable, then records every change the core
// makes beneath it through fsutil's observer (core/util/internal/io_trace.h). After the run, each
// point of the record (after the k-th operation, for every k) has a set of crash states: every
// write not yet covered by an fsync of its file may be kept, lost, torn at a 4 KiB boundary, or
// turned to zeros or garbage; every create, mkdir, rename or unlink not yet covered by an fsync of
// its directory may be kept or lost, each independently of the others. A state is written out as
// a real directory tree, for the checker to open it the way a restarted job does.

#include "core/util/internal/io_trace.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace crash {

// What the test knew to be true at a point of the run (e.g. "save of step 3 returned").
struct Mark {
    std::size_t position = 0; // number of operations recorded before it
    std::string what;
    uint64_t value = 0;
};

class CrashRecorder : public shardscope::fsutil::IoObserver {
public:
    // Snapshots `root` (regular files and directories; anything else is refused) and starts
    // recording changes beneath it.
    explicit CrashRecorder(const std::filesystem::path& root);
    ~CrashRecorder() override;
    void stop(); // stops recording (also done by the destructor)

    void mark(std::string what, uint64_t value = 0);
    const std::vector<Mark>& marks() const { return m_marks; }
    std::size_t operations() const { return m_ops.size(); }
    // Changes beneath the root the model could not place (a file or directory it never saw made):
    // the record would be incomplete, and its crash states fiction. Empty when all is well.
    const std::vector<std::string>& unplaced() const { return m_unplaced; }
    std::string describe(std::size_t op) const; // "rename step-00000002/rank0.safetensors.tmp -> …"

    // One crash point: the state after the first `position` operations, with what is pending.
    struct Point {
        std::size_t position = 0;
        std::size_t pending_writes = 0, pending_names = 0;
        double states = 1; // 5^writes * 2^names (a double: it can be astronomically large)
    };
    // Calls `visit(point, choice)` for at most `cap` states of every point: all of them when the
    // point has no more, else the two extremes (everything kept, everything lost) and random
    // others drawn from `seed`. `choice` is what materialize() takes.
    void for_each_state(std::size_t cap, uint64_t seed,
                        const std::function<void(const Point&, const std::vector<uint8_t>&)>& visit) const;
    // Writes the state of `point` under `choice` as a fresh tree at `out` (which must not exist).
    void materialize(const Point& point, const std::vector<uint8_t>& choice, const std::filesystem::path& out) const;
    // The tree after every operation, all durable: must equal the real tree (the model's check).
    void materialize_final(const std::filesystem::path& out) const;

    // IoObserver
    void created(int dirfd, const std::string& name, int fd) override;
    void made_directory(int dirfd, const std::string& name) override;
    void wrote(int fd, uint64_t offset, const void* data, std::size_t size) override;
    void synced(int fd) override;
    void renamed(int dirfd, const std::string& from, const std::string& to) override;
    void unlinked(int dirfd, const std::string& name) override;

private:
    enum class Kind : uint8_t { link, unlink, rename, write, sync };
    struct Op {
        Kind kind;
        int node = -1; // the directory (link, unlink, rename) or the file (write) or either (sync)
        int target = -1; // link, rename: the inode the name gets
        std::string name, to;
        uint64_t offset = 0;
        std::string data;
    };
    struct Node {
        bool dir = false;
        std::string data; // file: contents at the snapshot
        std::map<std::string, int> entries; // directory: at the snapshot
    };
    int lookup_fd(int fd) const; // the node of an open descriptor, or -1 outside the tree
    int snapshot(const std::filesystem::path& path);
    void record(Op op);
    std::vector<std::size_t> replay(std::size_t position, std::vector<Node>& nodes) const;
    static void apply(Node& node, const Op& op, uint8_t outcome);

    std::filesystem::path m_root;
    mutable std::mutex m_mutex;
    std::vector<Node> m_nodes; // node 0 is the root
    std::map<std::pair<uint64_t, uint64_t>, int> m_inode; // (st_dev, st_ino) -> node
    std::vector<std::map<std::string, int>> m_current; // every directory's names, as recorded
    std::vector<Op> m_ops;
    std::vector<Mark> m_marks;
    mutable std::vector<std::string> m_unplaced;
    bool m_recording = false;
};

// Recursively compares two trees (names, kinds, bytes); the first difference, or "" if none.
std::string tree_difference(const std::filesystem::path& a, const std::filesystem::path& b);

} // namespace crash
