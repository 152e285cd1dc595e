#include "core/foreign/io/pickle_reader.h"
#include "core/foreign/io/pickle_machine.h"
#include "core/foreign/io/pickle_store.h"

#include "core/util/error.h"

#include <bit>
#include <cstring>
#include <unordered_map>

namespace shardscope {

std::string_view to_string(PickleKind kind)
{
    switch (kind) {
    case PickleKind::none: return "None";
    case PickleKind::boolean: return "bool";
    case PickleKind::integer: return "int";
    case PickleKind::big_integer: return "int";
    case PickleKind::floating: return "float";
    case PickleKind::string: return "str";
    case PickleKind::bytes: return "bytes";
    case PickleKind::list: return "list";
    case PickleKind::tuple: return "tuple";
    case PickleKind::dict: return "dict";
    case PickleKind::set: return "set";
    case PickleKind::frozenset: return "frozenset";
    case PickleKind::global: return "global";
    case PickleKind::reduce: return "reduce";
    case PickleKind::new_object: return "object";
    case PickleKind::persistent_id: return "persistent_id";
    }
    return "?";
}

PickleDocument parse_pickle(std::string_view data, const std::string& display_path, const PickleLimits& limits)
{
    return PickleMachine<PickleStore>(PickleInput(data), display_path, limits).run();
}

} // namespace shardscope
