#pragma once
// Values crossing between Python and the core: JSON objects (every dict the module returns is a
// core *_json object converted here, so Python sees exactly what `shardctl --json` prints) and
// paths. Bad input from Python becomes Error(invalid_argument) naming what was wrong.

#include "core/storage/location.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>
#include <string>

namespace shardscope::python {

namespace py = pybind11;

// dict / list / str / int / float / bool / None. Strings that are not valid UTF-8 (tensor names
// read from files) get U+FFFD, as the CLI's JSON output does.
py::object to_python(const nlohmann::json& value);
py::object to_python(const nlohmann::ordered_json& value);

// The reverse, for training_state, tensor layouts, records and metadata: JSON-representable
// values only (str keys, finite floats, ints within 64 bits); `where` names the argument.
nlohmann::json from_python(py::handle value, const std::string& where);

// str, bytes or os.PathLike, encoded as the OS encodes file names (os.fsencode).
std::filesystem::path to_path(py::handle value);
// A location: a path as to_path takes it, or an s3:// or http(s):// URL (a str): a mirror, or a
// checkpoint verify, stats and diff read in place; its server's TLS certificate checked unless
// the caller passed verify_tls=False.
storage::Location to_location(py::handle value, bool verify_tls = true);

// Optional keyword values: None -> `fallback`.
int int_or(py::handle value, int fallback, const std::string& where);
// A step or a count: a non-negative integer up to 2^53 (what a manifest can hold exactly).
uint64_t u64_of(py::handle value, const std::string& where);

} // namespace shardscope::python
