// The `shardscope` Python module: ShardScope's checkpoint library, inspection and pipeline engine
// for Python training jobs. Every function calls the core function the matching shardctl command
// calls and returns the same JSON object as a dict; arrays cross through the buffer protocol.
// Links the core only: numpy and torch are reached at run time, never linked.

#include "python/bindings.h"
#include "python/errors.h"

#ifndef SHARDSCOPE_VERSION
#define SHARDSCOPE_VERSION "unknown"
#endif

PYBIND11_MODULE(shardscope, m)
{
    m.doc() = "ShardScope: sharded training checkpoints (save, load, verify, inspect, reshard, "
              "resume) and\n"
              "pipeline-parallel schedules. See docs/python.md.";
    m.attr("__version__") = SHARDSCOPE_VERSION;
    shardscope::python::register_errors(m);
    shardscope::python::bind_checkpoint(m);
    shardscope::python::bind_inspect(m);
    shardscope::python::bind_manager(m);
    shardscope::python::bind_pipeline(m);
}
