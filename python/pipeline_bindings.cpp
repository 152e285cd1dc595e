// schedule and plan: the pipeline engine as `shardctl schedule` drives it (partition, build the
// schedule, simulate, the training step's memory and communication), returning the core's
// step_plan_json object: the CLI's very dict.

#include "python/bindings.h"
#include "python/convert.h"

#include "core/pipeline/export.h"
#include "core/pipeline/simulator.h"
#include "core/pipeline/training.h"
#include "core/util/error.h"

#include <cmath>

namespace shardscope::python {

namespace pl = pipeline;
using nlohmann::json;

namespace {

// None: the uniform model (N x V identical layers, the textbook case); a path: a JSON or CSV
// profile file; a dict: the JSON profile object itself.
pl::Profile profile_from_python(py::object profile, int pieces)
{
    if (profile.is_none())
        return pl::uniform_profile(pieces);
    // Converting from Python needs the GIL; reading and parsing the profile do not.
    if (PyDict_Check(profile.ptr())) {
        const std::string text = from_python(profile, "profile").dump();
        py::gil_scoped_release unlocked;
        return pl::parse_profile_json(text, "profile");
    }
    const std::string file = to_path(profile).string();
    py::gil_scoped_release unlocked;
    return pl::load_profile(file);
}

// What `shardctl schedule` takes as --dp, --zero, --recompute, --gpu-memory, --link-gbps,
// --overlap-allreduce, --fp32-grads, checked by the core as the CLI's are.
struct Training {
    int dp = 1;
    int zero = 0;
    std::string recompute = "none";
    py::object gpu_memory_gib = py::none();
    double link_gbps = 0.0;
    bool overlap_allreduce = false;
    bool fp32_grads = false;
};

pl::TrainingOptions training_options(const Training& t)
{
    pl::TrainingOptions options;
    options.dp = t.dp;
    options.zero = t.zero;
    const auto mode = pl::parse_recompute(t.recompute);
    if (!mode)
        throw Error(ProblemKind::invalid_argument,
                    "recompute must be none, selective or full, not '" + t.recompute + "'");
    options.recompute = *mode;
    options.link_gbps = t.link_gbps;
    options.overlap_allreduce = t.overlap_allreduce;
    options.fp32_grads = t.fp32_grads;
    if (!t.gpu_memory_gib.is_none()) {
        const double gib = t.gpu_memory_gib.cast<double>();
        // 2^33 GiB: far beyond any device, and its byte count still fits in 64 bits
        if (!std::isfinite(gib) || gib <= 0 || gib > 8589934592.0 || gib * 1073741824.0 < 1)
            throw Error(ProblemKind::invalid_argument,
                        "gpu_memory_gib must be a number of GiB above 0 and at most 2^33");
        options.gpu_memory_bytes = static_cast<std::int64_t>(std::llround(gib * 1073741824.0));
    }
    if (!std::isfinite(options.link_gbps) || options.link_gbps < 0)
        throw Error(ProblemKind::invalid_argument, "link_gbps must be a finite number >= 0 (0: free links)");
    pl::check_options(options);
    return options;
}

pl::StepPlan make(int stages, int microbatches, const std::string& kind_name, py::object virtual_stages,
                  py::object profile, const std::string& partition, double p2p_latency_ms, const Training& training,
                  pl::Profile& used, pl::PartitionSpec& partition_spec)
{
    const auto kind = pl::parse_schedule_kind(kind_name);
    if (!kind)
        throw Error(ProblemKind::invalid_argument,
                    "schedule must be gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipe-v, not '" + kind_name +
                        "'");
    if (!std::isfinite(p2p_latency_ms) || p2p_latency_ms < 0)
        throw Error(ProblemKind::invalid_argument, "p2p_latency_ms must be a finite number of milliseconds >= 0");
    // The CLI's default: two chunks per stage for interleaved and the V kinds, one otherwise.
    const int chunks = int_or(virtual_stages, pl::default_virtual_stages(*kind), "virtual_stages");
    const pl::ScheduleSpec spec{.kind = *kind,
                                .stages = stages,
                                .microbatches = microbatches,
                                .virtual_stages = chunks,
                                .p2p_latency_ms = p2p_latency_ms};
    partition_spec = pl::parse_partition_spec(partition);
    pl::check_spec(spec);
    const pl::TrainingOptions options = training_options(training);
    used = profile_from_python(profile, spec.stages * spec.virtual_stages);
    py::gil_scoped_release unlocked; // partitioning and the simulation are pure core work
    return pl::make_step_plan(used, spec, partition_spec, options);
}

py::object run(bool with_ops, int stages, int microbatches, const std::string& kind, py::object virtual_stages,
               py::object profile, const std::string& partition, double p2p_latency_ms, const Training& training)
{
    pl::Profile used;
    pl::PartitionSpec partition_spec;
    const pl::StepPlan step = make(stages, microbatches, kind, virtual_stages, profile, partition, p2p_latency_ms,
                                   training, used, partition_spec);
    json out;
    {
        py::gil_scoped_release unlocked; // a plan with every op is a large JSON object
        out = pl::step_plan_json(step, used.name, pl::to_string(partition_spec), with_ops);
    }
    return to_python(out);
}

} // namespace

void bind_pipeline(py::module_& m)
{
    using namespace pybind11::literals;
    m.def(
        "schedule",
        [](int stages, int microbatches, const std::string& schedule, py::object virtual_stages, py::object profile,
           const std::string& partition, double p2p_latency_ms, int dp, int zero, const std::string& recompute,
           py::object gpu_memory_gib, double link_gbps, bool overlap_allreduce, bool fp32_grads) {
            return run(true, stages, microbatches, schedule, virtual_stages, profile, partition, p2p_latency_ms,
                       Training{dp, zero, recompute, gpu_memory_gib, link_gbps, overlap_allreduce, fp32_grads});
        },
        "stages"_a, "microbatches"_a, "schedule"_a = "1f1b", py::kw_only(), "virtual_stages"_a = py::none(),
        "profile"_a = py::none(), "partition"_a = "uniform", "p2p_latency_ms"_a = 0.0, "dp"_a = 1, "zero"_a = 0,
        "recompute"_a = "none", "gpu_memory_gib"_a = py::none(), "link_gbps"_a = 0.0, "overlap_allreduce"_a = false,
        "fp32_grads"_a = false,
        "Simulates one pipeline-parallel step and returns the `shardctl schedule --json` dict (every op\n"
        "with its start and end, per-stage stats and memory, bubble measured and closed form, step time with\n"
        "the data-parallel all-reduce). dp, zero, recompute, gpu_memory_gib, link_gbps, overlap_allreduce and\n"
        "fp32_grads are the CLI's --dp, --zero, --recompute, --gpu-memory, --link-gbps, --overlap-allreduce\n"
        "and --fp32-grads.\n"
        "profile: None (uniform layers), a JSON/CSV file path, or the profile dict; partition: uniform,\n"
        "params, compute or manual:B1,B2,...");
    m.def(
        "plan",
        [](int stages, int microbatches, const std::string& schedule, py::object virtual_stages, py::object profile,
           const std::string& partition, double p2p_latency_ms, int dp, int zero, const std::string& recompute,
           py::object gpu_memory_gib, double link_gbps, bool overlap_allreduce, bool fp32_grads) {
            return run(false, stages, microbatches, schedule, virtual_stages, profile, partition, p2p_latency_ms,
                       Training{dp, zero, recompute, gpu_memory_gib, link_gbps, overlap_allreduce, fp32_grads});
        },
        "stages"_a, "microbatches"_a, "schedule"_a = "1f1b", py::kw_only(), "virtual_stages"_a = py::none(),
        "profile"_a = py::none(), "partition"_a = "uniform", "p2p_latency_ms"_a = 0.0, "dp"_a = 1, "zero"_a = 0,
        "recompute"_a = "none", "gpu_memory_gib"_a = py::none(), "link_gbps"_a = 0.0, "overlap_allreduce"_a = false,
        "fp32_grads"_a = false,
        "The same dict without the op list (op_count instead): partition boundaries, bubble figures,\n"
        "per-stage stats and memory, step time; cheap enough to call in a search loop.");
}

} // namespace shardscope::python
