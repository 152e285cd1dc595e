#include "python/convert.h"

#include "core/checkpoint/manifest.h"
#include "core/storage/location.h"
#include "core/util/error.h"
#include "core/util/printable.h"

#include <cmath>
#include <limits>

namespace shardscope::python {

namespace {

template <class Json>
py::object json_to_python(const Json& j)
{
    switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.template get<uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.template get<double>());
    case nlohmann::json::value_t::string: {
        const auto& s = j.template get_ref<const std::string&>();
        PyObject* text = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
        if (!text)
            throw py::error_already_set();
        return py::reinterpret_steal<py::object>(text);
    }
    case nlohmann::json::value_t::array: {
        py::list out(j.size());
        std::size_t i = 0;
        for (const auto& item : j)
            out[i++] = json_to_python(item);
        return out;
    }
    case nlohmann::json::value_t::object: {
        py::dict out;
        for (const auto& [key, item] : j.items()) {
            PyObject* name = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "replace");
            if (!name)
                throw py::error_already_set();
            out[py::reinterpret_steal<py::object>(name)] = json_to_python(item);
        }
        return out;
    }
    case nlohmann::json::value_t::binary: break;
    }
    throw Error(ProblemKind::invalid_argument, "a JSON value of an unexpected type");
}

[[noreturn]] void refuse(const std::string& where, const std::string& what)
{
    throw Error(ProblemKind::invalid_argument, where + ": " + what);
}

std::string utf8(py::handle text, const std::string& where)
{
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
    if (!data) {
        PyErr_Clear();
        refuse(where, "is a string that cannot be encoded as UTF-8");
    }
    return std::string(data, static_cast<std::size_t>(size));
}

nlohmann::json convert(py::handle value, const std::string& where, int depth)
{
    // A bound on nesting (the manifest parser's) also stops a self-containing list.
    if (depth > kMaxManifestDepth)
        refuse(where, "is nested more than " + std::to_string(kMaxManifestDepth) + " levels deep");
    if (value.is_none())
        return nullptr;
    if (PyBool_Check(value.ptr()))
        return value.ptr() == Py_True;
    if (PyUnicode_Check(value.ptr()))
        return utf8(value, where);
    if (PyFloat_Check(value.ptr())) {
        const double d = PyFloat_AsDouble(value.ptr());
        if (!std::isfinite(d)) // JSON has no NaN or infinity: it would come back as null
            refuse(where, "is " + std::to_string(d) + ", which JSON cannot hold");
        return d;
    }
    if (PyDict_Check(value.ptr())) {
        nlohmann::json out = nlohmann::json::object();
        for (auto [key, item] : py::reinterpret_borrow<py::dict>(value)) {
            if (!PyUnicode_Check(key.ptr()))
                refuse(where, "has a key that is not a string (" + std::string(py::repr(key)) + ")");
            const std::string name = utf8(key, where);
            out[name] = convert(item, where + "[" + name + "]", depth + 1);
        }
        return out;
    }
    if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
        nlohmann::json out = nlohmann::json::array();
        std::size_t i = 0;
        for (auto item : py::reinterpret_borrow<py::sequence>(value))
            out.push_back(convert(item, where + "[" + std::to_string(i++) + "]", depth + 1));
        return out;
    }
    // Python ints and anything integer-like (numpy integers) through __index__.
    if (PyLong_Check(value.ptr()) || PyIndex_Check(value.ptr())) {
        PyObject* index = PyNumber_Index(value.ptr());
        if (!index) {
            PyErr_Clear();
            refuse(where, "is not a usable integer");
        }
        py::int_ number = py::reinterpret_steal<py::int_>(index);
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
        if (overflow == 0)
            return static_cast<int64_t>(v);
        if (overflow > 0) {
            const unsigned long long u = PyLong_AsUnsignedLongLong(number.ptr());
            if (!PyErr_Occurred())
                return static_cast<uint64_t>(u);
            PyErr_Clear();
        }
        refuse(where, "is an integer outside the 64-bit range JSON readers keep exactly");
    }
    // numpy floating scalars and other float-likes.
    if (PyObject_HasAttrString(value.ptr(), "__float__"))
        return convert(py::float_(py::reinterpret_borrow<py::object>(value)), where, depth);
    refuse(where,
           "holds a " + std::string(py::str(value.get_type().attr("__name__"))) +
               ", which is not a JSON value (dict, list, str, int, float, bool or None)");
}

} // namespace

py::object to_python(const nlohmann::json& value)
{
    return json_to_python(value);
}

py::object to_python(const nlohmann::ordered_json& value)
{
    return json_to_python(value);
}

nlohmann::json from_python(py::handle value, const std::string& where)
{
    return convert(value, where, 0);
}

std::filesystem::path to_path(py::handle value)
{
    py::object encoded;
    try {
        encoded = py::module_::import("os").attr("fsencode")(value);
    } catch (const py::error_already_set&) {
        throw Error(ProblemKind::invalid_argument,
                    "a path must be a str, bytes or os.PathLike, not " +
                        std::string(py::str(value.get_type().attr("__name__"))));
    }
    const std::string text(py::reinterpret_borrow<py::bytes>(encoded));
    if (text.empty()) // "" would be resolved against whatever the function makes of it
        throw Error(ProblemKind::invalid_argument, "an empty path names no file or folder");
    // A URL taken as a path would be a relative folder named "s3:", created and written.
    if (storage::is_url(text)) {
        (void)storage::parse_location(text); // an unknown scheme, a bad bucket: its own sentence
        throw Error(ProblemKind::invalid_argument,
                    printable(text) +
                        ": a local path is needed here; s3:// and http(s):// locations are not read "
                        "or written by this function");
    }
    return std::filesystem::path(text);
}

storage::Location to_location(py::handle value, bool verify_tls)
{
    if (py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value)) {
        const std::string text = py::isinstance<py::str>(value) ? value.cast<std::string>()
                                                                : std::string(py::reinterpret_borrow<py::bytes>(value));
        if (storage::is_url(text)) {
            storage::Location where = storage::parse_location(text);
            where.verify_tls = verify_tls;
            return where;
        }
    }
    return storage::Location(to_path(value));
}

int int_or(py::handle value, int fallback, const std::string& where)
{
    if (value.is_none())
        return fallback;
    const nlohmann::json j = from_python(value, where);
    if (!j.is_number_integer() || j.get<int64_t>() < std::numeric_limits<int>::min() ||
        j.get<int64_t>() > std::numeric_limits<int>::max())
        refuse(where, "must be an integer");
    return static_cast<int>(j.get<int64_t>());
}

uint64_t u64_of(py::handle value, const std::string& where)
{
    const nlohmann::json j = from_python(value, where);
    if (!j.is_number_integer() || (!j.is_number_unsigned() && j.get<int64_t>() < 0) || j.get<uint64_t>() > kMaxNumel)
        refuse(where, "must be an integer from 0 to 2^53");
    return j.get<uint64_t>();
}

} // namespace shardscope::python
