#pragma once
// shardscope.Error and its families. Every core Error raised into Python becomes an instance of
// the class of its kind's family, carrying the core's Problem: `.kind` (the problem kind string,
// e.g. "world_size_mismatch"), `.path` and `.rank` (None when the problem is about the whole
// checkpoint), `.message` and `.exit_code` (what shardctl would exit with).

#include <pybind11/pybind11.h>

namespace shardscope::python {

// Creates the classes in `module` and installs the translator for shardscope::Error.
void register_errors(pybind11::module_& module);

} // namespace shardscope::python
