#include "crash_model.h"

#include <algorithm>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace crash {

namespace fs = std::filesystem;
using shardscope::fsutil::set_io_observer;

namespace {

constexpr std::size_t kBlock = 4096; // the granularity at which an unsynced write tears

std::string read_all(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::pair<uint64_t, uint64_t> key_of(const struct stat& st)
{
    return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

// Outcomes of one pending write, and of one pending name change.
enum WriteOutcome : uint8_t { kept, lost, torn, zeros, garbage, write_outcomes };
constexpr uint8_t name_outcomes = 2; // kept, lost

} // namespace

CrashRecorder::CrashRecorder(const fs::path& root) : m_root(fs::canonical(root))
{
    snapshot(root);
    m_recording = true;
    set_io_observer(this);
}

CrashRecorder::~CrashRecorder()
{
    stop();
}

void CrashRecorder::stop()
{
    if (m_recording)
        set_io_observer(nullptr);
    m_recording = false;
}

int CrashRecorder::snapshot(const fs::path& path)
{
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        throw std::runtime_error(path.string() + ": cannot stat");
    const int id = static_cast<int>(m_nodes.size());
    m_nodes.push_back({});
    m_current.emplace_back();
    m_inode[key_of(st)] = id;
    if (S_ISDIR(st.st_mode)) {
        m_nodes[static_cast<std::size_t>(id)].dir = true;
        std::vector<std::string> names;
        for (const auto& entry : fs::directory_iterator(path))
            names.push_back(entry.path().filename().string());
        for (const auto& name : names) {
            const int child = snapshot(path / name);
            m_nodes[static_cast<std::size_t>(id)].entries[name] = child;
        }
        m_current[static_cast<std::size_t>(id)] = m_nodes[static_cast<std::size_t>(id)].entries;
    } else if (S_ISREG(st.st_mode)) {
        m_nodes[static_cast<std::size_t>(id)].data = read_all(path);
    } else {
        throw std::runtime_error(path.string() + ": neither a file nor a directory");
    }
    return id;
}

void CrashRecorder::mark(std::string what, uint64_t value)
{
    std::lock_guard lock(m_mutex);
    m_marks.push_back({m_ops.size(), std::move(what), value});
}

int CrashRecorder::lookup_fd(int fd) const
{
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return -1;
    const auto it = m_inode.find(key_of(st));
    if (it != m_inode.end())
        return it->second;
    // Outside the tree is fine; inside it means the record missed how this file came to be.
    char target[4096];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    const std::string root = m_root.string();
    if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)).starts_with(root) &&
        (static_cast<std::size_t>(n) == root.size() || target[root.size()] == '/'))
        m_unplaced.emplace_back(target, static_cast<std::size_t>(n));
    return -1;
}

void CrashRecorder::record(Op op)
{
    m_ops.push_back(std::move(op));
}

void CrashRecorder::created(int dirfd, const std::string& name, int fd)
{
    std::lock_guard lock(m_mutex);
    const int dir = lookup_fd(dirfd);
    struct stat st {};
    if (dir < 0 || ::fstat(fd, &st) != 0)
        return;
    const int id = static_cast<int>(m_nodes.size());
    m_nodes.push_back({});
    m_current.emplace_back();
    m_inode[key_of(st)] = id; // a reused inode number now names the new file
    m_current[static_cast<std::size_t>(dir)][name] = id;
    record({Kind::link, dir, id, name, {}, 0, {}});
}

void CrashRecorder::made_directory(int dirfd, const std::string& name)
{
    std::lock_guard lock(m_mutex);
    const int dir = lookup_fd(dirfd);
    struct stat st {};
    if (dir < 0 || ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    const int id = static_cast<int>(m_nodes.size());
    m_nodes.push_back({});
    m_nodes.back().dir = true;
    m_current.emplace_back();
    m_inode[key_of(st)] = id;
    m_current[static_cast<std::size_t>(dir)][name] = id;
    record({Kind::link, dir, id, name, {}, 0, {}});
}

void CrashRecorder::wrote(int fd, uint64_t offset, const void* data, std::size_t size)
{
    std::lock_guard lock(m_mutex);
    const int file = lookup_fd(fd);
    if (file >= 0)
        record({Kind::write, file, -1, {}, {}, offset, std::string(static_cast<const char*>(data), size)});
}

void CrashRecorder::synced(int fd)
{
    std::lock_guard lock(m_mutex);
    const int node = lookup_fd(fd);
    if (node >= 0)
        record({Kind::sync, node, -1, {}, {}, 0, {}});
}

void CrashRecorder::renamed(int dirfd, const std::string& from, const std::string& to)
{
    std::lock_guard lock(m_mutex);
    const int dir = lookup_fd(dirfd);
    if (dir < 0)
        return;
    auto& names = m_current[static_cast<std::size_t>(dir)];
    const auto it = names.find(from);
    if (it == names.end())
        throw std::logic_error("rename of '" + from + "', which the model does not know");
    const int target = it->second;
    names.erase(it);
    names[to] = target;
    record({Kind::rename, dir, target, from, to, 0, {}});
}

void CrashRecorder::unlinked(int dirfd, const std::string& name)
{
    std::lock_guard lock(m_mutex);
    const int dir = lookup_fd(dirfd);
    if (dir < 0)
        return;
    m_current[static_cast<std::size_t>(dir)].erase(name);
    record({Kind::unlink, dir, -1, name, {}, 0, {}});
}

std::string CrashRecorder::describe(std::size_t i) const
{
    const Op& op = m_ops.at(i);
    const std::string node = "node " + std::to_string(op.node);
    switch (op.kind) {
    case Kind::link: return "create " + op.name + " in " + node;
    case Kind::unlink: return "unlink " + op.name + " in " + node;
    case Kind::rename: return "rename " + op.name + " -> " + op.to + " in " + node;
    case Kind::write:
        return "write " + std::to_string(op.data.size()) + " bytes at " + std::to_string(op.offset) + " to " + node;
    case Kind::sync: return "fsync " + node;
    }
    return {};
}

void CrashRecorder::apply(Node& node, const Op& op, uint8_t outcome)
{
    switch (op.kind) {
    case Kind::link: node.entries[op.name] = op.target; break;
    case Kind::unlink: node.entries.erase(op.name); break;
    case Kind::rename:
        node.entries.erase(op.name);
        node.entries[op.to] = op.target;
        break;
    case Kind::write: {
        std::string bytes = op.data;
        if (outcome == torn) {
            // The write reached the disk up to a block boundary inside it (none: nothing).
            const uint64_t end = (op.offset + bytes.size() / 2) / kBlock * kBlock;
            if (end <= op.offset)
                return;
            bytes.resize(end - op.offset);
        } else if (outcome == zeros) {
            bytes.assign(bytes.size(), '\0');
        } else if (outcome == garbage) {
            std::mt19937_64 rng(op.offset * 1315423911u + bytes.size());
            for (char& c : bytes)
                c = static_cast<char>(rng());
        }
        if (node.data.size() < op.offset + bytes.size())
            node.data.resize(op.offset + bytes.size(), '\0');
        std::copy(bytes.begin(), bytes.end(), node.data.begin() + static_cast<std::ptrdiff_t>(op.offset));
        break;
    }
    case Kind::sync: break;
    }
}

// Replays the first `position` operations: what an fsync covered is folded into the durable
// state (`nodes`); what no fsync covered yet is returned, in the order it happened.
std::vector<std::size_t> CrashRecorder::replay(std::size_t position, std::vector<Node>& nodes) const
{
    nodes = m_nodes;
    std::vector<std::vector<std::size_t>> pending(m_nodes.size());
    for (std::size_t i = 0; i < position; ++i) {
        const Op& op = m_ops[i];
        auto& list = pending[static_cast<std::size_t>(op.node)];
        if (op.kind != Kind::sync) {
            list.push_back(i);
            continue;
        }
        for (std::size_t p : list)
            apply(nodes[static_cast<std::size_t>(op.node)], m_ops[p], kept);
        list.clear();
    }
    std::vector<std::size_t> slots;
    for (const auto& p : pending)
        slots.insert(slots.end(), p.begin(), p.end());
    std::sort(slots.begin(), slots.end());
    return slots;
}

void CrashRecorder::for_each_state(std::size_t cap, uint64_t seed,
                                   const std::function<void(const Point&, const std::vector<uint8_t>&)>& visit) const
{
    std::vector<std::vector<std::size_t>> pending(m_nodes.size());
    for (std::size_t position = 0; position <= m_ops.size(); ++position) {
        if (position > 0) {
            const std::size_t i = position - 1;
            const Op& op = m_ops[i];
            if (op.kind == Kind::sync)
                pending[static_cast<std::size_t>(op.node)].clear();
            else
                pending[static_cast<std::size_t>(op.node)].push_back(i);
        }
        std::vector<std::size_t> slots;
        for (const auto& p : pending)
            slots.insert(slots.end(), p.begin(), p.end());
        std::sort(slots.begin(), slots.end());
        Point point;
        point.position = position;
        std::vector<uint8_t> radix;
        for (std::size_t s : slots) {
            const bool write = m_ops[s].kind == Kind::write;
            radix.push_back(write ? uint8_t(write_outcomes) : name_outcomes);
            ++(write ? point.pending_writes : point.pending_names);
            point.states *= radix.back();
        }
        std::vector<uint8_t> choice(slots.size(), 0);
        if (point.states <= static_cast<double>(cap)) {
            while (true) { // every state, as a mixed-radix counter
                visit(point, choice);
                std::size_t d = 0;
                while (d < choice.size() && ++choice[d] == radix[d])
                    choice[d++] = 0;
                if (d == choice.size())
                    break;
            }
            continue;
        }
        // As strings: GCC 12 warns falsely on a set of byte vectors (-Wstringop-overread).
        std::set<std::string> seen;
        auto key = [&] { return std::string(choice.begin(), choice.end()); };
        std::mt19937_64 rng(seed ^ (position * 0x9e3779b97f4a7c15ull));
        visit(point, choice); // everything kept
        seen.insert(key());
        std::fill(choice.begin(), choice.end(), uint8_t(lost));
        visit(point, choice); // everything lost
        seen.insert(key());
        for (std::size_t tries = 0; seen.size() < cap && tries < 4 * cap; ++tries) {
            for (std::size_t d = 0; d < choice.size(); ++d)
                choice[d] = static_cast<uint8_t>(rng() % radix[d]);
            if (seen.insert(key()).second)
                visit(point, choice);
        }
    }
}

void CrashRecorder::materialize(const Point& point, const std::vector<uint8_t>& choice, const fs::path& out) const
{
    std::vector<Node> nodes;
    const std::vector<std::size_t> slots = replay(point.position, nodes);
    if (slots.size() != choice.size())
        throw std::logic_error("a choice for another crash point");
    for (std::size_t k = 0; k < slots.size(); ++k) {
        const Op& op = m_ops[slots[k]];
        if (choice[k] != lost)
            apply(nodes[static_cast<std::size_t>(op.node)], op, choice[k]);
    }
    std::set<int> written; // a directory reached twice (only a lost rename could do it) is written once
    std::function<void(int, const fs::path&)> write_out = [&](int id, const fs::path& path) {
        const Node& node = nodes[static_cast<std::size_t>(id)];
        if (!node.dir) {
            std::ofstream(path, std::ios::binary)
                .write(node.data.data(), static_cast<std::streamsize>(node.data.size()));
            return;
        }
        fs::create_directory(path);
        if (!written.insert(id).second)
            return;
        for (const auto& [name, child] : node.entries)
            write_out(child, path / name);
    };
    if (fs::exists(out))
        throw std::logic_error(out.string() + " exists");
    write_out(0, out);
}

void CrashRecorder::materialize_final(const fs::path& out) const
{
    std::vector<Node> nodes;
    Point all;
    all.position = m_ops.size();
    materialize(all, std::vector<uint8_t>(replay(all.position, nodes).size(), kept), out);
}

std::string tree_difference(const fs::path& a, const fs::path& b)
{
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(a))
        names.insert(e.path().filename().string());
    for (const auto& e : fs::directory_iterator(b))
        names.insert(e.path().filename().string());
    for (const auto& name : names) {
        const fs::path x = a / name, y = b / name;
        if (!fs::exists(x) || !fs::exists(y))
            return name + " exists only in " + (fs::exists(x) ? a : b).string();
        if (fs::is_directory(x) != fs::is_directory(y))
            return name + " is a directory in one tree only";
        if (fs::is_directory(x)) {
            if (auto d = tree_difference(x, y); !d.empty())
                return d;
        } else if (read_all(x) != read_all(y)) {
            return x.string() + " and " + y.string() + " differ";
        }
    }
    return {};
}

} // namespace crash
