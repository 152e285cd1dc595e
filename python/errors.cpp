#include "python/errors.h"

#include "core/util/error.h"

#include <array>
#include <string>

namespace shardscope::python {

namespace py = pybind11;

namespace {

// The families of docs/shardctl.md section 5, so a caller can catch "the checkpoint is bad"
// apart from "the disk is full" or "I passed a wrong argument" without listing kinds.
enum Family { base, checkpoint, foreign, content, storage, argument, cancelled, pipeline, family_count };

struct FamilyClass {
    const char* name;
    const char* doc;
};

constexpr std::array<FamilyClass, family_count> kClasses = {{
    {"Error", "A ShardScope error: .kind (problem kind), .path, .rank, .message, .exit_code."},
    {"CheckpointError", "The checkpoint breaks an invariant: world_size_mismatch, partial_write, hash_mismatch, ..."},
    {"ForeignFormatError", "A checkpoint ShardScope did not write is malformed: missing_file, crc_mismatch, ..."},
    {"ContentError", "A tensor content check: nonfinite_values, negative_second_moment, ..."},
    {"StorageError",
     "The file system or a server refused, or another job writes the root: cannot_open, already_exists, "
     "io_error, remote_error, root_locked."},
    {"InvalidArgumentError", "An argument the operation cannot use (also a ValueError)."},
    {"CancelledError", "The operation was cancelled."},
    {"PipelineError",
     "A layer profile or pipeline schedule is invalid: invalid_profile, "
     "invalid_schedule, deadlock."},
}};

PyObject* g_classes[family_count] = {};

Family family_of(ProblemKind kind)
{
    switch (kind) {
    case ProblemKind::missing_file:
    case ProblemKind::missing_tensor:
    case ProblemKind::unmapped_tensor:
    case ProblemKind::range_outside_file:
    case ProblemKind::crc_mismatch:
    case ProblemKind::invalid_archive:
    case ProblemKind::invalid_pickle:
    case ProblemKind::forbidden_pickle_opcode: return foreign;
    case ProblemKind::nonfinite_values:
    case ProblemKind::negative_second_moment:
    case ProblemKind::param_master_mismatch:
    case ProblemKind::all_zero_tensor:
    case ProblemKind::invalid_fp8_scale:
    case ProblemKind::replicas_differ: return content;
    case ProblemKind::cannot_open:
    case ProblemKind::already_exists:
    case ProblemKind::io_error:
    case ProblemKind::remote_error:
    case ProblemKind::root_locked: // another job writes the root: an environment problem, like io_error
        return storage;
    case ProblemKind::invalid_argument: return argument;
    case ProblemKind::cancelled: return cancelled;
    case ProblemKind::invalid_profile:
    case ProblemKind::invalid_schedule:
    case ProblemKind::deadlock: return pipeline;
    default: return checkpoint; // the invariant kinds, world_size_mismatch .. unreadable
    }
}

// Messages and paths carry file names, which on POSIX are bytes: a strict UTF-8 decode would
// turn the shardscope.Error into a UnicodeDecodeError. A path decodes as os.fsdecode does
// (surrogateescape: os.fsencode(e.path) gives the original bytes back); a message is for people,
// so an undecodable byte becomes U+FFFD.
py::str decode(const std::string& s, const char* errors)
{
    PyObject* text = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), errors);
    if (!text)
        throw py::error_already_set();
    return py::reinterpret_steal<py::str>(text);
}

void set_python_error(const Error& error)
{
    const Problem& p = error.problem();
    PyObject* type = g_classes[family_of(p.kind)];
    const py::str message = decode(p.message, "replace");
    py::object instance = py::reinterpret_borrow<py::object>(type)(message);
    instance.attr("kind") = std::string(to_string(p.kind));
    instance.attr("path") = p.path.empty() ? py::object(py::none()) : py::object(decode(p.path, "surrogateescape"));
    instance.attr("rank") = p.rank < 0 ? py::object(py::none()) : py::object(py::int_(p.rank));
    instance.attr("message") = message;
    instance.attr("exit_code") = exit_code_for(p.kind);
    PyErr_SetObject(type, instance.ptr());
}

} // namespace

void register_errors(py::module_& module)
{
    for (int f = 0; f < family_count; ++f) {
        const std::string qualified = "shardscope." + std::string(kClasses[f].name);
        py::object bases;
        if (f == base)
            bases = py::reinterpret_borrow<py::object>(PyExc_Exception);
        else if (f == argument) // `except ValueError` keeps working for callers that use it
            bases = py::make_tuple(py::handle(g_classes[base]), py::handle(PyExc_ValueError));
        else
            bases = py::reinterpret_borrow<py::object>(g_classes[base]);
        g_classes[f] = PyErr_NewExceptionWithDoc(qualified.c_str(), kClasses[f].doc, bases.ptr(), nullptr);
        if (!g_classes[f])
            throw py::error_already_set();
        module.add_object(kClasses[f].name, py::handle(g_classes[f]));
    }
    py::register_exception_translator([](std::exception_ptr thrown) {
        try {
            if (thrown)
                std::rethrow_exception(thrown);
        } catch (const Error& error) {
            set_python_error(error);
        }
    });
}

} // namespace shardscope::python
