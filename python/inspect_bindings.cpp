// stats and diff: inspect_content / diff_checkpoints and their --json objects.

#include "python/bindings.h"
#include "python/convert.h"
#include "python/interrupt.h"

#include "core/inspect/content.h"
#include "core/inspect/diff.h"

#include <cmath>

namespace shardscope::python {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// tensor="blocks.*" or tensor=["a.*", "b.*"], like the CLI's repeatable --tensor GLOB.
std::vector<std::string> globs_from_python(py::object tensor)
{
    if (tensor.is_none())
        return {};
    const json j = from_python(tensor, "tensor");
    std::vector<std::string> globs;
    if (j.is_string())
        globs.push_back(j.get<std::string>());
    else if (j.is_array())
        for (const auto& g : j) {
            if (!g.is_string())
                throw Error(ProblemKind::invalid_argument, "tensor must be a glob or a list of globs");
            globs.push_back(g.get<std::string>());
        }
    else
        throw Error(ProblemKind::invalid_argument, "tensor must be a glob or a list of globs");
    return globs;
}

std::optional<double> tolerance(py::object value, const char* name)
{
    if (value.is_none())
        return std::nullopt;
    const json j = from_python(value, name);
    if (!j.is_number() || j.get<double>() < 0)
        throw Error(ProblemKind::invalid_argument, std::string(name) + " must be a non-negative number");
    return j.get<double>();
}

py::object stats(py::object path, py::object tensor, int threads, bool raw_fp8, bool verify_tls)
{
    const storage::Location where = to_location(path, verify_tls);
    ContentOptions options;
    options.tensor_globs = globs_from_python(tensor);
    options.threads = threads;
    options.raw_fp8 = raw_fp8;
    const json out = interruptible([&](const std::atomic<bool>* interrupted) {
        options.cancel = interrupted;
        return content_report_json(inspect_content(where, options));
    });
    return to_python(out);
}

py::object diff(py::object a, py::object b, py::object atol, py::object rtol, py::object tensor, int threads,
                bool raw_fp8, bool verify_tls)
{
    const storage::Location path_a = to_location(a, verify_tls);
    const storage::Location path_b = to_location(b, verify_tls);
    DiffOptions options;
    options.atol = tolerance(atol, "atol");
    options.rtol = tolerance(rtol, "rtol");
    options.tensor_globs = globs_from_python(tensor);
    options.threads = threads;
    options.raw_fp8 = raw_fp8;
    const json out = interruptible([&](const std::atomic<bool>* interrupted) {
        options.cancel = interrupted;
        return diff_report_json(diff_checkpoints(path_a, path_b, options));
    });
    return to_python(out);
}

} // namespace

void bind_inspect(py::module_& m)
{
    using namespace pybind11::literals;
    m.def("stats", &stats, "path"_a, py::kw_only(), "tensor"_a = py::none(), "threads"_a = 0, "raw_fp8"_a = false,
          "verify_tls"_a = true,
          "Statistics of every tensor's values, whole and per part (rank or file), and the health checks\n"
          "(nonfinite_values, negative_second_moment, param_master_mismatch): the `shardctl stats --json`\n"
          "dict. Reads any format stats reads; tensor= takes a glob or a list of globs. FP8 weights with\n"
          "128x128 block scales (`*_scale_inv`) are dequantized unless raw_fp8=True (`--raw-fp8`).\n"
          "verify_tls=False: an https:// server's certificate is not checked (a test server only).");
    m.def("diff", &diff, "a"_a, "b"_a, py::kw_only(), "atol"_a = py::none(), "rtol"_a = py::none(),
          "tensor"_a = py::none(), "threads"_a = 0, "raw_fp8"_a = false, "verify_tls"_a = true,
          "Pairs the tensors of two checkpoints (any formats and world sizes) and compares them element by\n"
          "element, bitwise unless atol/rtol are given: the `shardctl diff --json` dict. raw_fp8=True\n"
          "compares FP8 weights' stored values instead of their dequantized ones (`--raw-fp8`).");
}

} // namespace shardscope::python
