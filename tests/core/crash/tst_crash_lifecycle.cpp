// Power cuts over a run's lifetime: CheckpointManager's save and save_async with keep-last-K
// rotation and every `latest` update, and the mirror tier's upload and retention. Each crash
// state is reopened as a restarted job does (load_resume_point, with the mirror fallback), then saved
// to once more.

#include "crash_check.h"

#include "core/open/verify.h"
#include "core/checkpoint/save.h"
#include "core/run/demo.h"

#include <fstream>
#include <set>

using namespace crash;

namespace {

constexpr uint64_t kNumel = 2000;
constexpr int kWorld = 2;
constexpr std::size_t kCap = 12;

std::vector<RankState> state(uint64_t seed)
{
    return make_demo_state(seed, kNumel, kWorld, ParamDtype::F16);
}

struct Run {
    int keep = 2;
    std::optional<int> mirror_keep;
    std::map<uint64_t, std::vector<RankState>> saved; // step -> what was saved

    ManagerOptions options(const fs::path& base) const
    {
        ManagerOptions o;
        o.root = base / "ckpt";
        o.keep_last = keep;
        if (mirror_keep) {
            o.mirror = base / "mirror";
            o.mirror_keep_last = *mirror_keep;
        }
        return o;
    }
};

// Of `steps` (oldest first), the newest `keep` must be in `root` and verify. The oldest of them
// may be gone only once a newer step than all of them is there and verifies: rotation deletes a
// step only after its replacement is durable.
std::string retained(const fs::path& root, std::vector<uint64_t> steps, int keep, bool need_upload)
{
    if (steps.size() > static_cast<std::size_t>(keep))
        steps.erase(steps.begin(), steps.end() - keep);
    auto good = [&](uint64_t step) {
        const fs::path dir = root / step_dir_name(step);
        return fs::exists(dir / "manifest.json") && (!need_upload || fs::exists(dir / kUploadManifest)) &&
            verify_checkpoint(dir).ok();
    };
    bool replaced = false;
    std::error_code ec;
    if (!steps.empty() && fs::is_directory(root, ec))
        for (const auto& e : fs::directory_iterator(root))
            if (auto s = parse_step_dir_name(e.path().filename().string()); s && *s > steps.back() && good(*s))
                replaced = true;
    for (std::size_t i = 0; i < steps.size(); ++i)
        if (!good(steps[i]) && !(i == 0 && replaced))
            return root.filename().string() + "/" + step_dir_name(steps[i]) +
                " was to be kept, but it is gone or does not verify";
    return {};
}

std::string check_restart(const Run& run, const fs::path& out, const std::vector<uint64_t>& committed,
                          const std::vector<uint64_t>& uploaded)
{
    const ManagerOptions o = run.options(out);
    if (auto why = manifest_without_shards(o.root); !why.empty())
        return why;
    if (o.mirror)
        if (auto why = manifest_without_shards(o.mirror->path); !why.empty())
            return "mirror: " + why;
    std::optional<std::string> latest;
    try {
        if (fs::is_directory(o.root))
            latest = read_latest(o.root);
    } catch (const Error& e) {
        return std::string("`latest` is unreadable: ") + e.what();
    }
    if (!committed.empty() && (!latest || parse_step_dir_name(*latest).value_or(0) < committed.back()))
        return "step " + std::to_string(committed.back()) + " had committed, but `latest` names " +
            (latest ? *latest : std::string("nothing"));
    if (latest && !fs::exists(o.root / *latest / "manifest.json"))
        return "`latest` names " + *latest + ", which has no manifest";
    if (auto why = unreported_leftovers(o.root); !why.empty())
        return why;
    if (o.mirror) {
        std::optional<std::string> mirror_latest;
        try {
            if (fs::is_directory(o.mirror->path))
                mirror_latest = read_latest(o.mirror->path);
        } catch (const Error& e) {
            return std::string("the mirror's `latest` is unreadable: ") + e.what();
        }
        if (!uploaded.empty() && (!mirror_latest || parse_step_dir_name(*mirror_latest).value_or(0) < uploaded.back()))
            return "step " + std::to_string(uploaded.back()) + " had been uploaded, but the mirror's `latest` names " +
                (mirror_latest ? *mirror_latest : std::string("nothing"));
        if (mirror_latest &&
            !(fs::exists(o.mirror->path / *mirror_latest / "manifest.json") &&
              fs::exists(o.mirror->path / *mirror_latest / kUploadManifest)))
            return "the mirror's `latest` names " + *mirror_latest + ", which is not a finished upload";
    }
    if (auto why = retained(o.root, committed, run.keep, false); !why.empty())
        return why;
    if (o.mirror)
        if (auto why = retained(o.mirror->path, uploaded, *run.mirror_keep, true); !why.empty())
            return "mirror: " + why;

    CheckpointManager manager(o);
    if (latest || !committed.empty()) { // the restarted job resumes
        const LoadedCheckpoint loaded = manager.load_resume_point({.expected_world_size = kWorld}).checkpoint;
        const uint64_t step = loaded.manifest.step;
        if (!committed.empty() && step < committed.back())
            return "resumed from step " + std::to_string(step) + ", older than committed step " +
                std::to_string(committed.back());
        const auto it = run.saved.find(step);
        if (it == run.saved.end() || loaded.ranks != it->second)
            return "resumed from step " + std::to_string(step) + " with bytes that were not saved as that step";
        // The health record is part of the commit: present whenever the step is, and the count
        // of the values it commits.
        StateHealth counted;
        for (const RankState& r : it->second)
            counted += scan_health(r);
        if (loaded.manifest.health() != counted)
            return "step " + std::to_string(step) + " was committed without the health of its values";
        // The mirror fallback: with the local copy of that step damaged, its mirror copy (when
        // the upload had finished) is what the job resumes from, with the same bytes.
        if (o.mirror && fs::exists(o.mirror->path / step_dir_name(step) / kUploadManifest)) {
            const fs::path shard = loaded.dir / loaded.manifest.shards.front().path;
            std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
            f.seekg(-1, std::ios::end);
            const char last = static_cast<char>(f.get());
            f.seekp(-1, std::ios::end);
            f.put(static_cast<char>(last ^ 0x5a));
            f.close();
            const ResumePoint fallback = manager.load_resume_point({.expected_world_size = kWorld});
            if (!fallback.used_mirror || fallback.checkpoint.ranks != it->second)
                return "with the local copy of step " + std::to_string(step) +
                    " damaged, the job did not resume from the mirror's copy";
        }
    }
    const uint64_t next = run.saved.rbegin()->first + 100;
    manager.save(state(next), next);
    manager.wait();
    if (auto why = leftovers(o.root); !why.empty())
        return "after the next save: " + why;
    if (read_latest(o.root) != step_dir_name(next))
        return "after the next save, `latest` does not name it";
    if (o.mirror) {
        if (auto why = leftovers(o.mirror->path); !why.empty())
            return "after the next save: mirror: " + why;
        if (read_latest(o.mirror->path) != step_dir_name(next))
            return "after the next save, the mirror's `latest` does not name it";
    }
    return {};
}

} // namespace

class TestCrashLifecycle : public QObject {
    Q_OBJECT

    Workspace m_work;
    fs::path fresh() { return m_work.fresh(); }

    void check(const char* name, const CrashRecorder& rec, const Run& run, uint64_t seed)
    {
        check_states(name, rec, kCap, seed, m_work.scratch(), [&](const CrashRecorder::Point& p, const fs::path& out) {
            return check_restart(run, out, marked(rec, p.position, "committed"), marked(rec, p.position, "uploaded"));
        });
    }

private slots:
    void saveWithRotation()
    {
        const fs::path base = fresh();
        Run run;
        run.keep = 2;
        CrashRecorder rec(base);
        {
            CheckpointManager manager(run.options(base));
            for (uint64_t step = 1; step <= 4; ++step) {
                run.saved[step] = state(step);
                manager.save(run.saved[step], step);
                rec.mark("committed", step);
            }
        }
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        check("CheckpointManager::save, keep 2, steps 1-4", rec, run, 21);
    }

    void saveAsyncWithRotation()
    {
        const fs::path base = fresh();
        Run run;
        run.keep = 2;
        CrashRecorder rec(base);
        {
            CheckpointManager manager(run.options(base));
            for (uint64_t step = 1; step <= 3; ++step) {
                run.saved[step] = state(step);
                manager.save_async(run.saved[step], step);
                if (step > 1) // save_async waits for the previous write before it returns
                    rec.mark("committed", step - 1);
            }
            manager.wait();
            rec.mark("committed", 3);
        }
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        check("CheckpointManager::save_async, keep 2, steps 1-3", rec, run, 22);
    }

    void mirrorUploadAndRetention()
    {
        const fs::path base = fresh();
        Run run;
        run.keep = 1;
        run.mirror_keep = 2;
        CrashRecorder rec(base);
        {
            CheckpointManager manager(run.options(base));
            for (uint64_t step = 1; step <= 3; ++step) {
                run.saved[step] = state(step);
                manager.save(run.saved[step], step);
                rec.mark("committed", step);
                manager.wait(); // the upload (and the mirror's rotation) has finished
                rec.mark("uploaded", step);
            }
        }
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        check("CheckpointManager with a mirror, keep 1 + mirror keep 2, steps 1-3", rec, run, 23);
    }

    void restartOverLeftovers()
    {
        // A run killed after committing step 3 but before `latest` named it, and then again in
        // the middle of saving step 4, of replacing `latest` and of uploading step 3: the
        // restarted job saves steps 3 and 4 again over what it left (clean-up, move-aside, the
        // stale mirror copy's removal, all under power cuts).
        const fs::path base = fresh();
        Run run;
        run.keep = 2;
        run.mirror_keep = 2;
        {
            CheckpointManager manager(run.options(base));
            for (uint64_t step = 1; step <= 2; ++step) {
                run.saved[step] = state(step);
                manager.save(run.saved[step], step);
            }
            manager.wait();
        }
        const fs::path root = base / "ckpt", mirror = base / "mirror";
        save_sharded(state(1003), root / step_dir_name(3), 3); // committed, never published
        fs::create_directories(root / step_dir_name(4));
        std::ofstream(root / step_dir_name(4) / "rank0.safetensors.tmp") << "half a shard";
        std::ofstream(root / "latest.tmp") << "step-00000004";
        fs::create_directories(mirror / step_dir_name(3));
        fs::copy_file(root / step_dir_name(3) / "rank0.safetensors", mirror / step_dir_name(3) / "rank0.safetensors");

        CrashRecorder rec(base);
        for (uint64_t step = 1; step <= 2; ++step) {
            rec.mark("committed", step);
            rec.mark("uploaded", step);
        }
        {
            CheckpointManager manager(run.options(base));
            for (uint64_t step = 3; step <= 4; ++step) {
                run.saved[step] = state(step);
                manager.save(run.saved[step], step);
                rec.mark("committed", step);
                manager.wait();
                rec.mark("uploaded", step);
            }
        }
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        bool moved_aside = false;
        for (const auto& e : fs::directory_iterator(root))
            moved_aside = moved_aside || e.path().filename().string().starts_with("step-00000003.superseded-");
        QVERIFY(moved_aside);
        check("restart over a committed, unpublished step and leftovers, steps 3-4 with a mirror", rec, run, 24);
    }
};

QTEST_GUILESS_MAIN(TestCrashLifecycle)
#include "tst_crash_lifecycle.moc"
