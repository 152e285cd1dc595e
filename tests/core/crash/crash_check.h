#pragma once
// Running a checker over every crash state of a recorded run, and the checks a restarted job
// relies on (docs/reliability.md, "What survives what").

#include "crash_model.h"

#include "core/checkpoint/load.h"
#include "core/open/verify.h"
#include "core/run/lifecycle.h"
#include "core/util/hashing.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstdio>
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

namespace crash {

namespace fs = std::filesystem;
using namespace shardscope;

// Where crash states are written: memory when it can (thousands of small trees), else `fallback`.
inline fs::path scratch_dir(const fs::path& fallback)
{
    const fs::path shm = "/dev/shm";
    if (::access(shm.c_str(), W_OK) == 0) {
        const fs::path dir = shm / ("shardscope-crash-" + std::to_string(::getpid()));
        fs::create_directories(dir);
        return dir;
    }
    return fallback;
}

// A suite's directories: a fresh one for each recorded run, and the scratch space for crash states.
class Workspace {
public:
    Workspace() : m_scratch(scratch_dir(m_tmp.path().toStdString())) {}
    ~Workspace()
    {
        std::error_code ec;
        fs::remove_all(m_scratch, ec);
    }
    fs::path fresh()
    {
        const fs::path dir = fs::path(m_tmp.path().toStdString()) / ("run-" + std::to_string(++m_counter));
        fs::create_directories(dir);
        return dir;
    }
    const fs::path& scratch() const { return m_scratch; }

private:
    QTemporaryDir m_tmp;
    fs::path m_scratch;
    int m_counter = 0;
};

// The steps whose completion the test marked before `position` ("committed" marks), in order.
inline std::vector<uint64_t> marked(const CrashRecorder& rec, std::size_t position, const std::string& what)
{
    std::vector<uint64_t> out;
    for (const Mark& m : rec.marks())
        if (m.position <= position && m.what == what)
            out.push_back(m.value);
    return out;
}

// Ends a recorded run: the record must account for every change (nothing unplaced, and replayed
// with everything kept it is the real tree, byte for byte), else its crash states are fiction.
inline void finish_recording(CrashRecorder& rec, const fs::path& base, const fs::path& scratch)
{
    rec.stop();
    const std::string missed =
        rec.unplaced().empty() ? std::string() : "the record missed changes to " + rec.unplaced().front();
    QVERIFY2(missed.empty(), missed.c_str());
    const fs::path final_tree = scratch / "final";
    rec.materialize_final(final_tree);
    const std::string difference = tree_difference(base, final_tree);
    fs::remove_all(final_tree);
    QVERIFY2(difference.empty(), difference.c_str());
}

// A digest of a tree's names, kinds and bytes: states that leave the same tree are checked once.
inline std::string tree_digest(const fs::path& root)
{
    std::vector<fs::path> paths;
    for (const auto& e : fs::recursive_directory_iterator(root))
        paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    Sha256 sha;
    for (const auto& p : paths) {
        const std::string name = fs::relative(p, root).string() + (fs::is_directory(p) ? "/" : "") + '\0';
        sha.update(name.data(), name.size());
        if (fs::is_regular_file(p)) {
            std::ifstream in(p, std::ios::binary);
            const std::string bytes((std::istreambuf_iterator<char>(in)), {});
            const std::string size = std::to_string(bytes.size()) + '\0';
            sha.update(size.data(), size.size());
            sha.update(bytes.data(), bytes.size());
        }
    }
    return sha.hex_digest();
}

// Under AddressSanitizer every check runs several times slower: a quarter as many states a point
// (the counts printed say so; the Release run checks them all), so that the suite stays within
// CI's time (tst_crash_lifecycle took 328 s at half).
constexpr std::size_t sanitizer_cap(std::size_t cap)
{
#if defined(__SANITIZE_ADDRESS__)
    return std::max<std::size_t>(2, cap / 4);
#else
    return cap;
#endif
}

// Materializes every state the recorder allows (at most `cap` per crash point), runs `check` on
// each (it returns why the state is wrong, or ""), prints "<name>: <N> crash states", and fails
// the test with the first few wrong states.
template <class Check>
void check_states(const char* name, const CrashRecorder& rec, std::size_t cap, uint64_t seed, const fs::path& scratch,
                  Check check)
{
    cap = sanitizer_cap(cap);
    std::size_t states = 0, points = 0, exhaustive = 0;
    std::set<std::pair<std::size_t, std::string>> checked; // (marks so far, tree): same verdict
    std::size_t last_position = SIZE_MAX;
    std::vector<std::string> failures;
    rec.for_each_state(cap, seed, [&](const CrashRecorder::Point& point, const std::vector<uint8_t>& choice) {
        if (point.position != last_position) {
            ++points;
            exhaustive += point.states <= static_cast<double>(cap);
            last_position = point.position;
        }
        const fs::path out = scratch / ("state-" + std::to_string(states++));
        rec.materialize(point, choice, out);
        std::size_t marks = 0;
        for (const Mark& m : rec.marks())
            marks += m.position <= point.position;
        std::string why;
        if (checked.insert({marks, tree_digest(out)}).second) {
            try {
                why = check(point, out);
            } catch (const std::exception& e) {
                why = std::string("the check threw: ") + e.what();
            }
        }
        if (!why.empty() && failures.size() < 5) {
            std::string outcome;
            for (uint8_t c : choice)
                outcome += static_cast<char>('0' + c);
            failures.push_back("after operation " + std::to_string(point.position) +
                               (point.position ? " (" + rec.describe(point.position - 1) + ")" : std::string()) +
                               ", outcomes " + outcome + ": " + why);
        }
        std::error_code ec;
        fs::remove_all(out, ec);
    });
    std::printf("%s: %zu crash states, %zu distinct trees checked (%zu operations, %zu crash points, %zu of them "
                "exhaustive, at most %zu states each, seed %llu)\n",
                name, states, checked.size(), rec.operations(), points, exhaustive, cap,
                static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    std::string all;
    for (const auto& f : failures)
        all += f + "\n";
    QVERIFY2(failures.empty(), all.c_str());
    QVERIFY(states > 0);
}

// Why the checkpoint at `dir` is not exactly `expected`, or "".
inline std::string differs(const fs::path& dir, const std::vector<RankState>& expected)
{
    LoadedCheckpoint loaded = load_sharded(dir, static_cast<int>(expected.size()));
    if (loaded.ranks != expected)
        return dir.filename().string() + " loads, but not the bytes that were saved";
    return {};
}

// Every directory under `root` (and one level down) holding a manifest must verify: a manifest
// means complete, after a crash as before it.
inline std::string manifest_without_shards(const fs::path& root)
{
    std::error_code ec;
    if (!fs::is_directory(root, ec))
        return {};
    std::vector<fs::path> dirs{root};
    for (const auto& e : fs::directory_iterator(root))
        if (e.is_directory())
            dirs.push_back(e.path());
    for (const auto& dir : dirs) {
        if (!fs::exists(dir / "manifest.json"))
            continue;
        const VerifyReport report = verify_checkpoint(dir);
        if (!report.ok())
            return dir.filename().string() + " has a manifest but does not verify: " + report.problems.front().message;
    }
    return {};
}

// Whether verify reports the directory `dir`, which has no manifest, for what it is: a partial
// write when the crash left files in it, not a checkpoint at all when it left it empty.
inline bool reported_as_interrupted(const fs::path& dir)
{
    const VerifyReport report = verify_checkpoint(dir);
    const ProblemKind expected = fs::is_empty(dir) ? ProblemKind::invalid_manifest : ProblemKind::partial_write;
    return !report.ok() && report.problems.front().kind == expected;
}

// What a crash left must be reported: verify of a step directory without a manifest fails (as
// above), and list_steps shows each such step as incomplete, saying why.
inline std::string unreported_leftovers(const fs::path& root)
{
    std::error_code ec;
    if (!fs::is_directory(root, ec))
        return {};
    for (const StepInfo& s : list_steps(root)) {
        if (fs::exists(root / s.name / "manifest.json"))
            continue;
        if (s.complete || s.problem.empty())
            return s.name + " has no manifest, but list_steps does not say it is incomplete";
        if (!reported_as_interrupted(root / s.name))
            return s.name + " has no manifest, but verify does not report it as an interrupted save";
    }
    return {};
}

// Leftovers a finished save must not leave: a .tmp file or a step directory without a manifest.
inline std::string leftovers(const fs::path& root)
{
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".tmp"))
            return e.path().string() + " was left behind";
        if (e.is_directory() && parse_step_dir_name(name) && !fs::exists(e.path() / "manifest.json"))
            return e.path().string() + " (no manifest) was left behind";
    }
    return {};
}

} // namespace crash
