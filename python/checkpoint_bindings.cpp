// verify, load, manifest, save_sharded, write_rank_shard + commit, digests, plan_reshard, reshard:
// each calls the core function the matching shardctl command calls and returns its JSON object.

#include "python/arrays.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "python/interrupt.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/reshard.h"
#include "core/checkpoint/save.h"
#include "core/open/detect.h"
#include "core/open/verify.h"
#include "core/report/report.h"
#include "core/report/verdict.h"
#include "core/run/lifecycle.h"

#include <algorithm>
#include <chrono>

namespace shardscope::python {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<RankStateView> views(const std::vector<HeldRank>& held)
{
    std::vector<RankStateView> out;
    for (const HeldRank& h : held)
        out.push_back(h.view);
    return out;
}

// None (any world size) as -1, else 1..kMaxWorldSize as shardctl's --expect-world-size takes it.
int expected_world_size_or_any(py::handle value)
{
    const int wanted = int_or(value, -1, "expected_world_size");
    if (!value.is_none() && (wanted < 1 || wanted > kMaxWorldSize))
        throw Error(ProblemKind::invalid_argument,
                    "expected_world_size must be 1.." + std::to_string(kMaxWorldSize) + " or None (any), not " +
                        std::to_string(wanted));
    return wanted;
}

py::object verify(py::object path, bool fast, py::object expected_world_size, int threads, bool content,
                  bool verify_tls)
{
    VerifyOptions options;
    options.fast = fast;
    options.threads = threads;
    options.expected_world_size = expected_world_size_or_any(expected_world_size);
    const storage::Location where = to_location(path, verify_tls);
    const json report = interruptible([&](const std::atomic<bool>* interrupted) { // hashing runs on the core's threads
        options.cancel = interrupted;
        return resume_check_json(check_resume(where, options, content));
    });
    return to_python(report);
}

py::list load(py::object path, py::object expected_world_size, int threads, bool allow_unhealthy,
              bool allow_partial_state)
{
    ResumeOptions options;
    options.expected_world_size = expected_world_size_or_any(expected_world_size);
    options.load.threads = threads;
    options.allow_unhealthy = allow_unhealthy;
    options.load.allow_unread_state = allow_partial_state;
    const fs::path dir = to_path(path);
    ResumePoint point;
    {
        py::gil_scoped_release unlocked;
        point = load_step_or_root(dir, options);
    }
    // What was passed over or left unread is said, as shardctl load says it on stderr.
    const py::object warn = py::module_::import("warnings").attr("warn");
    for (const auto& s : point.skipped)
        warn("shardscope: passed over " + s);
    for (const auto& u : point.checkpoint.unread)
        warn("shardscope: not restored: " + u);
    return ranks_to_python(std::move(point.checkpoint.ranks));
}

py::object manifest(py::object path)
{
    const fs::path dir = to_path(path);
    Manifest m;
    {
        py::gil_scoped_release unlocked;
        m = read_manifest(resolve_checkpoint_dir(dir));
    }
    return manifest_to_python(m);
}

py::object save(py::object path, py::object step, py::object ranks, py::object dtype, py::object training_state,
                py::object tensors, double wall_clock_seconds, int threads, bool durable)
{
    const fs::path dir = to_path(path);
    const std::vector<HeldRank> held = ranks_from_python(ranks, dtype_from_python(dtype));
    uint64_t total = 0;
    for (const HeldRank& h : held)
        total += h.view.numel();
    SaveOptions options;
    options.threads = threads;
    options.durable = durable;
    options.wall_clock_seconds = wall_clock_seconds;
    options.training_state = from_python(training_state, "training_state");
    options.tensors = tensors_from_python(tensors, total);
    const uint64_t step_number = u64_of(step, "step");
    Manifest m;
    {
        py::gil_scoped_release unlocked;
        m = save_sharded(views(held), dir, step_number, options);
    }
    return manifest_to_python(m);
}

py::object write_rank(py::object path, py::object rank, int world_size, py::object dtype, bool durable)
{
    const fs::path dir = to_path(path);
    const HeldRank held = rank_from_python(rank, dtype_from_python(dtype), std::nullopt, std::nullopt);
    WriteOptions options;
    options.durable = durable;
    ShardRecord record;
    {
        py::gil_scoped_release unlocked;
        record = write_rank_shard(dir, held.view, world_size, options);
    }
    return to_python(shard_record_json(record));
}

// The records and the metadata become a manifest draft that the core's strict parser reads
// (digest formats, ranges, dtype, tensors against the total), then commit checks the layout and
// that every shard is in place: one set of rules for what a manifest may say.
py::object commit_records(py::object path, py::object records, py::object meta, bool durable)
{
    const fs::path dir = to_path(path);
    json draft = from_python(meta, "meta");
    if (!draft.is_object())
        throw Error(ProblemKind::invalid_argument, "meta must be a dict (world_size, step, dtype, ...)");
    static const char* const kMetaKeys[] = {"world_size",        "step",    "dtype",          "param_dtype",
                                            "param_numel_total", "tensors", "training_state", "wall_clock_seconds"};
    for (const auto& [key, value] : draft.items())
        if (std::find(std::begin(kMetaKeys), std::end(kMetaKeys), key) == std::end(kMetaKeys))
            throw Error(ProblemKind::invalid_argument, "meta has an unknown key '" + key + "'");
    for (const char* required : {"world_size", "step"})
        if (!draft.contains(required))
            throw Error(ProblemKind::invalid_argument, std::string("meta needs '") + required + "'");
    if (draft.contains("dtype") && draft.contains("param_dtype"))
        throw Error(ProblemKind::invalid_argument,
                    "meta has both 'dtype' and 'param_dtype': give one (they name the same field)");
    if (draft.contains("dtype")) {
        draft["param_dtype"] = draft["dtype"];
        draft.erase("dtype");
    }
    draft["schema_version"] = kSchemaVersion;
    draft["shards"] = from_python(records, "records");
    if (!draft.contains("param_numel_total") && draft["shards"].is_array()) {
        uint64_t total = 0; // the records' slices, back to back
        for (const auto& r : draft["shards"])
            if (r.is_object() && r.contains("param_shard_numel") && r["param_shard_numel"].is_number_integer() &&
                r["param_shard_numel"].get<int64_t>() > 0)
                total += r["param_shard_numel"].get<uint64_t>(); // the parser checks each one
        draft["param_numel_total"] = total;
    }
    Manifest parsed;
    try {
        parsed = parse_manifest(draft.dump(), (dir / "manifest.json").string());
    } catch (const Error& e) {
        throw Error(ProblemKind::invalid_argument, std::string("commit: ") + e.what(), e.problem().path,
                    e.problem().rank);
    }
    CheckpointMeta checkpoint_meta;
    copy_checkpoint_meta(checkpoint_meta, parsed);
    Manifest m;
    {
        py::gil_scoped_release unlocked;
        m = commit(dir, parsed.shards, checkpoint_meta, durable);
    }
    return manifest_to_python(m);
}

py::object digests(py::object ranks)
{
    // The hasher only wants the bytes in offset order, whatever dtype they are.
    std::vector<HeldRank> held = ranks_from_python(ranks, std::nullopt);
    std::sort(held.begin(), held.end(), [](const HeldRank& a, const HeldRank& b) {
        return a.view.param_shard_offset < b.view.param_shard_offset;
    });
    StateDigests d;
    {
        py::gil_scoped_release unlocked;
        FlatStateHasher hasher;
        for (const HeldRank& h : held) {
            hasher.add_bytes(FlatStateHasher::param, h.view.param.data(), h.view.param.size_bytes());
            hasher.add_bytes(FlatStateHasher::master, h.view.master.data(), h.view.master.size_bytes());
            hasher.add_bytes(FlatStateHasher::exp_avg, h.view.exp_avg.data(), h.view.exp_avg.size_bytes());
            hasher.add_bytes(FlatStateHasher::exp_avg_sq, h.view.exp_avg_sq.data(), h.view.exp_avg_sq.size_bytes());
        }
        d = hasher.finish();
    }
    return to_python(
        json{{"param", d.param}, {"master", d.master}, {"exp_avg", d.exp_avg}, {"exp_avg_sq", d.exp_avg_sq}});
}

py::object plan(py::object path, int to, bool verify_tls)
{
    const storage::Location where = to_location(path, verify_tls);
    const json out = interruptible(
        [&](const std::atomic<bool>*) { return reshard_plan_json(plan_reshard(read_manifest_at(where), to)); });
    return to_python(out);
}

py::object reshard_to(py::object path, int to, py::object out, int threads, bool durable)
{
    const fs::path source = to_path(path);
    const fs::path destination = to_path(out);
    ReshardOptions options;
    options.threads = threads;
    options.durable = durable;
    json result;
    {
        py::gil_scoped_release unlocked;
        const auto start = std::chrono::steady_clock::now();
        const ReshardResult done = reshard(source, to, destination, options);
        const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
        result = reshard_result_json(done, destination, seconds.count());
    }
    return to_python(result);
}

} // namespace

void bind_checkpoint(py::module_& m)
{
    using namespace pybind11::literals;
    m.def("verify", &verify, "path"_a, py::kw_only(), "fast"_a = false, "expected_world_size"_a = py::none(),
          "threads"_a = 0, "content"_a = false, "verify_tls"_a = true,
          "Checks every invariant and every shard's hash (SHA-256, or XXH3 with fast=True) of a checkpoint\n"
          "directory, a root with `latest`, or a foreign format. Returns the `shardctl verify --json` dict;\n"
          "a bad checkpoint is reported there (ok=False, problems), not raised. content=True reads every\n"
          "tensor's values too (verify --content): result['verdict']['state'] is 'safe' only then.\n"
          "verify_tls=False: an https:// server's certificate is not checked (a test server only).");
    m.def("load", &load, "path"_a, "expected_world_size"_a, py::kw_only(), "threads"_a = 0, "allow_unhealthy"_a = false,
          "allow_partial_state"_a = false,
          "Loads every rank (all invariants and SHA-256 checked while the bytes land) and returns a list of\n"
          "rank dicts: rank, offset, dtype, param (uint16 raw bits), master, exp_avg, exp_avg_sq (float32),\n"
          "as numpy arrays that own the loaded memory. expected_world_size=None accepts any world size;\n"
          "otherwise a different one raises CheckpointError(kind='world_size_mismatch'). A root loads its\n"
          "newest healthy step, warning about each newer one passed over (allow_unhealthy=True: the newest);\n"
          "a shard tensor besides the four raises CheckpointError(kind='unread_state') unless\n"
          "allow_partial_state=True, which warns and drops it.");
    m.def("manifest", &manifest, "path"_a,
          "The manifest.json of a step directory (or of the step a root's `latest` names), as a dict.");
    m.def("save_sharded", &save, "path"_a, "step"_a, "ranks"_a, py::kw_only(), "dtype"_a = "bf16",
          "training_state"_a = py::none(), "tensors"_a = py::none(), "wall_clock_seconds"_a = 0.0, "threads"_a = 0,
          "durable"_a = true,
          "Writes one rank<r>.safetensors per rank dict in parallel, straight from the arrays' buffers, and\n"
          "commits manifest.json last. A rank dict without 'rank'/'offset' gets its position and the end of\n"
          "the previous rank. Bad input raises before anything is written. Returns the manifest dict.");
    m.def("write_rank_shard", &write_rank, "path"_a, "rank"_a, "world_size"_a, py::kw_only(), "dtype"_a = "bf16",
          "durable"_a = true,
          "Phase 1 of a multi-process save: writes this rank's shard (tmp, hashed while written, fsync,\n"
          "rename) and returns its record, the manifest's shards[] entry, to send to the coordinator.");
    m.def("commit", &commit_records, "path"_a, "records"_a, "meta"_a, py::kw_only(), "durable"_a = true,
          "Phase 2, on one process: checks the records form a complete checkpoint and writes manifest.json\n"
          "atomically. meta: world_size, step, dtype, and optionally param_numel_total, tensors,\n"
          "training_state, wall_clock_seconds. Returns the manifest dict.");
    m.def("digests", &digests, "ranks"_a,
          "SHA-256 of the four flat vectors reassembled in offset order, as `shardctl load --json` prints\n"
          "them: the same global state gives the same digests at any world size.");
    m.def("plan_reshard", &plan, "path"_a, "to"_a, py::kw_only(), "verify_tls"_a = true,
          "The `shardctl plan-reshard --json` dict, of a step or root on a disk, in a bucket (s3://) or\n"
          "on a web server (https://): only `latest` and the manifest are read.");
    m.def("reshard", &reshard_to, "path"_a, "to"_a, "out"_a, py::kw_only(), "threads"_a = 0, "durable"_a = true,
          "Verifies the source, writes it resharded to `to` ranks into `out` and commits; returns the\n"
          "`shardctl reshard --json` dict.");
}

} // namespace shardscope::python
