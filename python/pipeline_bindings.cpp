// schedule and plan: the pipeline engine as `shardctl schedule` drives it (partition, build the
// schedule, simulate), returning the core's plan_json object.

#include "python/bindings.h"
#include "python/convert.h"

#include "core/pipeline/export.h"
#include "core/pipeline/simulator.h"
#include "core/util/error.h"

#include <cmath>

namespace shardscope::python
{

namespace pl = pipeline;
using nlohmann::json;

namespace
{

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

pl::Plan make(int stages, int microbatches, const std::string& kind_name, py::object virtual_stages,
              py::object profile, const std::string& partition, double p2p_latency_ms,
              pl::Profile& used, pl::PartitionSpec& partition_spec)
{
    const auto kind = pl::parse_schedule_kind(kind_name);
    if (!kind)
        throw Error(ProblemKind::invalid_argument,
                    "schedule must be gpipe, 1f1b, interleaved or zb-h1, not '" + kind_name + "'");
    if (!std::isfinite(p2p_latency_ms) || p2p_latency_ms < 0)
        throw Error(ProblemKind::invalid_argument,
                    "p2p_latency_ms must be a finite number of milliseconds >= 0");
    // The CLI's default: two chunks per stage for interleaved, one otherwise.
    const int chunks =
        int_or(virtual_stages, *kind == pl::ScheduleKind::interleaved ? 2 : 1, "virtual_stages");
    const pl::ScheduleSpec spec{.kind = *kind,
                                .stages = stages,
                                .microbatches = microbatches,
                                .virtual_stages = chunks,
                                .p2p_latency_ms = p2p_latency_ms};
    partition_spec = pl::parse_partition_spec(partition);
    pl::check_spec(spec);
    used = profile_from_python(profile, spec.stages * spec.virtual_stages);
    py::gil_scoped_release unlocked; // partitioning and the simulation are pure core work
    const std::vector<int> boundaries =
        pl::partition(used, spec.stages * spec.virtual_stages, partition_spec);
    return pl::make_plan(used, spec, boundaries);
}

py::object run(bool with_ops, int stages, int microbatches, const std::string& kind,
               py::object virtual_stages, py::object profile, const std::string& partition,
               double p2p_latency_ms)
{
    pl::Profile used;
    pl::PartitionSpec partition_spec;
    const pl::Plan plan = make(stages, microbatches, kind, virtual_stages, profile, partition,
                               p2p_latency_ms, used, partition_spec);
    json out;
    {
        py::gil_scoped_release unlocked; // a plan with every op is a large JSON object
        out = pl::plan_json(plan, used.name, pl::to_string(partition_spec), with_ops);
    }
    return to_python(out);
}

} // namespace

void bind_pipeline(py::module_& m)
{
    using namespace pybind11::literals;
    m.def(
        "schedule",
        [](int stages, int microbatches, const std::string& schedule, py::object virtual_stages,
           py::object profile, const std::string& partition, double p2p_latency_ms) {
            return run(true, stages, microbatches, schedule, virtual_stages, profile, partition,
                       p2p_latency_ms);
        },
        "stages"_a, "microbatches"_a, "schedule"_a = "1f1b", py::kw_only(),
        "virtual_stages"_a = py::none(), "profile"_a = py::none(), "partition"_a = "uniform",
        "p2p_latency_ms"_a = 0.0,
        "Simulates one pipeline-parallel step and returns the `shardctl schedule --json` dict "
        "(every op\n"
        "with its start and end, per-stage stats, bubble measured and closed form). profile: None "
        "(uniform\n"
        "layers), a JSON/CSV file path, or the profile dict; partition: uniform, params, compute "
        "or\n"
        "manual:B1,B2,...");
    m.def(
        "plan",
        [](int stages, int microbatches, const std::string& schedule, py::object virtual_stages,
           py::object profile, const std::string& partition, double p2p_latency_ms) {
            return run(false, stages, microbatches, schedule, virtual_stages, profile, partition,
                       p2p_latency_ms);
        },
        "stages"_a, "microbatches"_a, "schedule"_a = "1f1b", py::kw_only(),
        "virtual_stages"_a = py::none(), "profile"_a = py::none(), "partition"_a = "uniform",
        "p2p_latency_ms"_a = 0.0,
        "The same plan without the op list (op_count instead): partition boundaries, bubble "
        "figures and\n"
        "per-stage stats, cheap enough to call in a search loop; the report's pipeline section.");
}

} // namespace shardscope::python
