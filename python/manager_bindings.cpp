// CheckpointManager: a checkpoint root over a run's lifetime (core/run/lifecycle.h) — `latest`,
// keep-last-K, asynchronous saves, the mirror tier and resuming — for a Python training loop.

#include "python/arrays.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "python/interrupt.h"

#include "core/run/mirror_tier.h"
#include "core/checkpoint/reshard.h"
#include "core/run/lifecycle.h"

#include <algorithm>
#include <memory>
#include <mutex>

namespace shardscope::python {

namespace {

class PyCheckpointManager {
public:
    PyCheckpointManager(py::object root, int keep, py::object mirror, int mirror_keep, bool durable, int threads,
                        bool verify_tls)
    {
        ManagerOptions options;
        options.root = to_path(root);
        options.keep_last = keep;
        if (!mirror.is_none())
            options.mirror = to_location(mirror, verify_tls);
        options.mirror_keep_last = mirror_keep;
        options.durable = durable;
        options.threads = threads;
        m_manager = std::make_unique<CheckpointManager>(std::move(options));
    }

    // Dropped without wait() or `with`: join the pending write without the GIL (the writer
    // never needs Python, but other Python threads should run meanwhile), and report an error
    // of that write as a ResourceWarning rather than losing it: a destructor cannot raise.
    ~PyCheckpointManager()
    {
        std::string unreported;
        {
            py::gil_scoped_release unlocked;
            std::lock_guard lock(m_mutex);
            try {
                m_manager->wait();
            } catch (const std::exception& e) {
                unreported = e.what();
            } catch (...) {
                unreported = "unknown error";
            }
        }
        if (unreported.empty())
            return;
        py::error_scope keep; // an exception already being raised (if any) survives the warning
        PyObject* text = PyUnicode_DecodeUTF8(unreported.data(), static_cast<Py_ssize_t>(unreported.size()), "replace");
        const std::string message =
            "shardscope.CheckpointManager destroyed with an unreported error of a background save "
            "(call wait() or use `with`): " +
            (text ? std::string(PyUnicode_AsUTF8(text)) : std::string("(undecodable message)"));
        Py_XDECREF(text);
        PyErr_Clear();
        if (PyErr_WarnEx(PyExc_ResourceWarning, message.c_str(), 1) < 0) // warnings set to "error"
            PyErr_WriteUnraisable(nullptr);
    }

    py::object save(py::object step, py::object ranks, py::object dtype, py::object training_state, py::object tensors,
                    double wall_clock_seconds)
    {
        Call call = prepare(step, ranks, dtype, training_state, tensors, wall_clock_seconds);
        Manifest m;
        {
            py::gil_scoped_release unlocked;
            std::lock_guard lock(m_mutex);
            m = m_manager->save(call.views, call.step, call.options);
        }
        return manifest_to_python(m);
    }

    void save_async(py::object step, py::object ranks, py::object dtype, py::object training_state, py::object tensors,
                    double wall_clock_seconds)
    {
        Call call = prepare(step, ranks, dtype, training_state, tensors, wall_clock_seconds);
        // The core's save_async refuses bad input (check_save) before it touches the root.
        py::gil_scoped_release unlocked; // waiting for the previous write and the snapshot copy
        std::lock_guard lock(m_mutex);
        m_manager->save_async(call.views, call.step, std::move(call.options));
    }

    void wait()
    {
        py::gil_scoped_release unlocked;
        std::lock_guard lock(m_mutex);
        m_manager->wait();
    }

    // What became of each step the mirror should hold: a failed upload is not raised (training goes
    // on; format.md 6.7), so this is where a job learns that the bucket lacks a step, and why.
    py::list upload_status()
    {
        std::vector<UploadStatus> statuses;
        {
            py::gil_scoped_release unlocked;
            std::lock_guard lock(m_mutex);
            statuses = m_manager->upload_status();
        }
        py::list out;
        for (const UploadStatus& s : statuses)
            out.append(to_python(to_json(s)));
        return out;
    }

    py::object latest()
    {
        std::optional<std::string> name;
        {
            py::gil_scoped_release unlocked;
            std::lock_guard lock(m_mutex);
            name = read_latest(m_manager->options().root);
        }
        return name ? py::object(py::str(*name)) : py::object(py::none());
    }

    // None when neither the root nor the mirror has a `latest` (a fresh run), else the loaded step.
    py::object resume(py::object world_size, bool allow_unhealthy, bool allow_partial_state)
    {
        const int wanted = int_or(world_size, -1, "world_size");
        if (!world_size.is_none() && wanted < 1)
            throw Error(ProblemKind::invalid_argument,
                        "world_size must be at least 1 (or None for the saved one), not " + std::to_string(wanted));
        ResumePoint point;
        LoadedCheckpoint& loaded = point.checkpoint;
        int saved_world = 0;
        const bool fresh = interruptible([&](const std::atomic<bool>* interrupted) { // it may read the bucket's copy
            std::lock_guard lock(m_mutex);
            if (!m_manager->holds_a_run())
                return true;
            ResumeOptions options;
            options.allow_unhealthy = allow_unhealthy;
            options.load.allow_unread_state = allow_partial_state;
            options.load.cancel = interrupted;
            point = m_manager->load_resume_point(options);
            saved_world = loaded.manifest.world_size;
            // A job restarting on another number of ranks: the even split, as shardctl train does.
            if (wanted > 0 && wanted != saved_world) {
                std::sort(loaded.ranks.begin(), loaded.ranks.end(), [](const RankState& a, const RankState& b) {
                    return a.param_shard_offset < b.param_shard_offset;
                });
                loaded.ranks = reshard_in_memory(loaded.ranks, wanted);
            }
            return false;
        });
        if (fresh)
            return py::none();
        py::dict out = py::reinterpret_borrow<py::dict>(manifest_to_python(loaded.manifest));
        out["path"] = loaded.dir.string();
        out["from_mirror"] = point.used_mirror;
        py::list skipped, unread;
        for (const auto& s : point.skipped)
            skipped.append(py::str(s));
        for (const auto& u : loaded.unread)
            unread.append(py::str(u));
        out["skipped_unhealthy"] = skipped;
        out["unread_state"] = unread;
        out["saved_world_size"] = saved_world;
        out["ranks"] = ranks_to_python(std::move(loaded.ranks));
        return out;
    }

    py::dict options() const
    {
        const ManagerOptions& o = m_manager->options();
        py::dict out;
        out["root"] = o.root.string();
        out["keep"] = o.keep_last;
        out["mirror"] = o.mirror ? py::object(py::str(storage::to_string(*o.mirror))) : py::object(py::none());
        out["mirror_keep"] = o.mirror_keep_last;
        out["durable"] = o.durable;
        return out;
    }

    // Joins the background write without the GIL, so a writer never waits on Python.
    void close()
    {
        py::gil_scoped_release unlocked;
        std::lock_guard lock(m_mutex);
        m_manager->wait();
    }

private:
    struct Call {
        std::vector<HeldRank> held;
        std::vector<RankStateView> views;
        uint64_t step = 0;
        SaveOptions options;
    };

    static Call prepare(py::object step, py::object ranks, py::object dtype, py::object training_state,
                        py::object tensors_layout, double wall_clock_seconds)
    {
        Call call;
        call.step = u64_of(step, "step");
        call.held = ranks_from_python(ranks, dtype_from_python(dtype));
        uint64_t total = 0;
        for (const HeldRank& h : call.held) {
            call.views.push_back(h.view);
            total += h.view.numel();
        }
        call.options.wall_clock_seconds = wall_clock_seconds;
        call.options.training_state = from_python(training_state, "training_state");
        call.options.tensors = tensors_from_python(tensors_layout, total);
        return call;
    }

    std::unique_ptr<CheckpointManager> m_manager;
    std::mutex m_mutex; // the core manager expects one caller at a time; Python threads may be several
};

} // namespace

void bind_manager(py::module_& m)
{
    using namespace pybind11::literals;
    py::class_<PyCheckpointManager>(m, "CheckpointManager",
                                    "A checkpoint root over a training run: one directory per step, `latest` replaced\n"
                                    "atomically after each commit, the last `keep` complete steps kept, saves in the\n"
                                    "background, an optional mirror directory (a second tier with its own retention)\n"
                                    "that resume falls back to. Use it as a context manager to wait on exit.")
        .def(py::init<py::object, int, py::object, int, bool, int, bool>(), "root"_a, "keep"_a = 3,
             "mirror"_a = py::none(), py::kw_only(), "mirror_keep"_a = 10, "durable"_a = true, "threads"_a = 0,
             "verify_tls"_a = true)
        .def("save", &PyCheckpointManager::save, "step"_a, "ranks"_a, py::kw_only(), "dtype"_a = "bf16",
             "training_state"_a = py::none(), "tensors"_a = py::none(), "wall_clock_seconds"_a = 0.0,
             "Saves the rank dicts as step `step` (straight from their buffers), publishes it in `latest`,\n"
             "rotates; returns the manifest dict.")
        .def("save_async", &PyCheckpointManager::save_async, "step"_a, "ranks"_a, py::kw_only(), "dtype"_a = "bf16",
             "training_state"_a = py::none(), "tensors"_a = py::none(), "wall_clock_seconds"_a = 0.0,
             "Copies the state and returns while the write proceeds on a background thread; the arrays may\n"
             "be changed as soon as it returns. An error of the write is raised by the next call.")
        .def("wait", &PyCheckpointManager::wait,
             "Waits for the pending write and mirror uploads; raises the write's error. A failed upload is not\n"
             "raised (training goes on): upload_status() says which steps the mirror lacks and why.")
        .def("upload_status", &PyCheckpointManager::upload_status,
             "One dict per step the mirror should hold: step, name, state ('pending', 'uploading', 'uploaded',\n"
             "'failed'), attempts, and for a failed one error and retry_in_saves.")
        .def("latest", &PyCheckpointManager::latest, "The step directory name `latest` holds, or None.")
        .def("resume", &PyCheckpointManager::resume, "world_size"_a = py::none(), py::kw_only(),
             "allow_unhealthy"_a = false, "allow_partial_state"_a = false,
             "Loads the newest healthy step at or before `latest` (the mirror's copy if the local one does not\n"
             "verify; the newest whatever its health with allow_unhealthy=True) and returns its manifest dict\n"
             "plus path, from_mirror, saved_world_size, skipped_unhealthy (the newer steps passed over, why),\n"
             "unread_state (shard tensors dropped, only with allow_partial_state=True; otherwise they raise\n"
             "CheckpointError(kind='unread_state')) and ranks (rank dicts, resharded evenly to world_size when\n"
             "given and different); None when there is nothing to resume. Raises ContentError when no step\n"
             "is healthy.")
        .def_property_readonly("options", &PyCheckpointManager::options)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](PyCheckpointManager& self, py::object, py::object, py::object) { self.close(); });
}

} // namespace shardscope::python
