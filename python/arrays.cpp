#include "python/arrays.h"

#include "core/checkpoint/dtype.h"
#include "core/util/error.h"
#include "python/convert.h"

#include <cstdint>
#include <pybind11/numpy.h>
#include <string_view>

namespace shardscope::python {

namespace {

[[noreturn]] void refuse(const std::string& where, const std::string& what, int rank = -1)
{
    throw Error(ProblemKind::invalid_argument, where + ": " + what, {}, rank);
}

// The buffer's element type, without a native or little-endian byte-order prefix (a big-endian
// array would need a byte swap: refused rather than converted behind the caller's back).
std::string_view element_code(const std::string& format)
{
    std::string_view code = format;
    if (!code.empty() && (code.front() == '@' || code.front() == '=' || code.front() == '<'))
        code.remove_prefix(1);
    return code;
}

template <class T>
std::span<const T> view_buffer(py::handle owner, const char* key, std::string_view codes, const char* expected,
                               const std::string& where, int rank, std::vector<py::buffer_info>& held)
{
    py::object value = py::reinterpret_borrow<py::dict>(owner).contains(key)
        ? py::reinterpret_borrow<py::object>(owner[py::str(key)])
        : py::object(py::none());
    const std::string field = where + "['" + key + "']";
    if (value.is_none())
        refuse(field, "is missing", rank);
    if (!PyObject_CheckBuffer(value.ptr()))
        refuse(field,
               "is a " + std::string(py::str(value.get_type().attr("__name__"))) +
                   ", not an array: pass a numpy array or anything with the buffer protocol (a "
                   "torch tensor: "
                   "t.numpy(); bf16/fp16 parameters as raw bits: t.view(torch.int16).numpy())",
               rank);
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(value).request();
    const std::string_view code = element_code(info.format);
    if (static_cast<std::size_t>(info.itemsize) != sizeof(T) || code.size() != 1 ||
        codes.find(code.front()) == std::string_view::npos)
        refuse(field, "must hold " + std::string(expected) + ", not elements of format '" + info.format + "'", rank);
    if (info.ndim != 1)
        refuse(field,
               "must be 1-D (a flat slice), not " + std::to_string(info.ndim) + "-D: flatten it with .reshape(-1)",
               rank);
    if (info.shape[0] > 1 && info.strides[0] != info.itemsize)
        refuse(field,
               "is not contiguous (a strided view): pass numpy.ascontiguousarray(...) or a "
               ".contiguous() tensor",
               rank);
    // A span of T over an address T cannot live at is undefined behaviour (and a fault on some
    // machines); numpy makes such arrays from a byte offset (np.frombuffer(..., offset=1)).
    if (reinterpret_cast<std::uintptr_t>(info.ptr) % alignof(T) != 0)
        refuse(field,
               "is not aligned to its " + std::to_string(alignof(T)) +
                   "-byte elements (a view at an odd byte offset): pass a copy, numpy.array(a) or "
                   "t.clone()",
               rank);
    const std::span<const T> span(static_cast<const T*>(info.ptr), static_cast<std::size_t>(info.shape[0]));
    held.push_back(std::move(info));
    return span;
}

uint64_t u64_field(py::handle owner, const char* key, std::optional<uint64_t> fallback, const std::string& where,
                   int rank)
{
    const py::dict dict = py::reinterpret_borrow<py::dict>(owner);
    if (!dict.contains(key) || dict[key].is_none()) {
        if (!fallback)
            refuse(where + "['" + key + "']", "is missing", rank);
        return *fallback;
    }
    return u64_of(dict[key], where + "['" + key + "']");
}

template <class T>
py::array owned_array(std::vector<T>&& values)
{
    if (values.empty())
        return py::array_t<T>(0);
    auto* holder = new std::vector<T>(std::move(values));
    py::capsule owner(holder, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>({static_cast<py::ssize_t>(holder->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                          holder->data(), owner);
}

} // namespace

ParamDtype dtype_from_python(py::handle text)
{
    if (!PyUnicode_Check(text.ptr()))
        throw Error(ProblemKind::invalid_argument, "dtype must be a string such as 'bf16' or 'f16'");
    const std::string spelled = py::str(text);
    const auto dtype = param_dtype_from_string(spelled);
    if (!dtype)
        throw Error(ProblemKind::invalid_argument, "dtype '" + spelled + "' is neither f16 nor bf16");
    return *dtype;
}

HeldRank rank_from_python(py::handle rank, std::optional<ParamDtype> wanted, std::optional<int> default_rank,
                          std::optional<uint64_t> default_offset)
{
    const std::string where = default_rank ? "ranks[" + std::to_string(*default_rank) + "]" : std::string("rank");
    if (!PyDict_Check(rank.ptr()))
        refuse(where, "must be a dict with rank, offset, param, master, exp_avg and exp_avg_sq");
    HeldRank held;
    const uint64_t number =
        u64_field(rank, "rank", default_rank ? std::optional<uint64_t>(*default_rank) : std::nullopt, where, -1);
    if (number > static_cast<uint64_t>(kMaxWorldSize))
        refuse(where + "['rank']", "is above the limit of " + std::to_string(kMaxWorldSize));
    held.view.rank = static_cast<int>(number);
    const int r = held.view.rank;
    held.view.param_shard_offset = u64_field(rank, "offset", default_offset, where, r);
    const py::dict dict = py::reinterpret_borrow<py::dict>(rank);
    const std::optional<ParamDtype> own = dict.contains("dtype") && !dict["dtype"].is_none()
        ? std::optional(dtype_from_python(dict["dtype"]))
        : std::nullopt;
    if (wanted && own && *own != *wanted)
        refuse(where + "['dtype']",
               "is " + std::string(py::str(dict["dtype"])) + " but the checkpoint's dtype is " +
                   std::string(to_string(*wanted)),
               r);
    const ParamDtype dtype = wanted.value_or(own.value_or(ParamDtype::BF16));
    held.view.dtype = dtype;
    // 2-byte raw bits: uint16, int16 (torch's .view(torch.int16)) or numpy float16 (f16 only).
    held.view.param = view_buffer<uint16_t>(rank, "param", dtype == ParamDtype::F16 ? "Hhe" : "Hh",
                                            "16-bit raw parameter bits (uint16 or int16)", where, r, held.buffers);
    held.view.master = view_buffer<float>(rank, "master", "f", "float32", where, r, held.buffers);
    held.view.exp_avg = view_buffer<float>(rank, "exp_avg", "f", "float32", where, r, held.buffers);
    held.view.exp_avg_sq = view_buffer<float>(rank, "exp_avg_sq", "f", "float32", where, r, held.buffers);
    // Unequal lengths are the core's to refuse (check_rank_state, before anything is written):
    // one rule and one message, whichever language saves.
    return held;
}

std::vector<HeldRank> ranks_from_python(py::handle ranks, std::optional<ParamDtype> dtype)
{
    if (!PyList_Check(ranks.ptr()) && !PyTuple_Check(ranks.ptr()))
        throw Error(ProblemKind::invalid_argument, "ranks must be a list of rank dicts");
    std::vector<HeldRank> held;
    uint64_t next_offset = 0;
    int index = 0;
    for (auto item : py::reinterpret_borrow<py::sequence>(ranks)) {
        held.push_back(rank_from_python(item, dtype, index++, next_offset));
        next_offset = held.back().view.param_shard_offset + held.back().view.numel();
    }
    if (held.empty())
        throw Error(ProblemKind::invalid_argument, "ranks is empty: nothing to save");
    return held;
}

py::dict rank_to_python(RankState&& s)
{
    py::dict out;
    out["rank"] = s.rank;
    out["offset"] = s.param_shard_offset;
    out["dtype"] = std::string(to_string(s.dtype));
    out["param"] = owned_array(std::move(s.param));
    out["master"] = owned_array(std::move(s.master));
    out["exp_avg"] = owned_array(std::move(s.exp_avg));
    out["exp_avg_sq"] = owned_array(std::move(s.exp_avg_sq));
    return out;
}

py::list ranks_to_python(std::vector<RankState>&& ranks)
{
    py::list out;
    for (RankState& s : ranks)
        out.append(rank_to_python(std::move(s)));
    return out;
}

std::vector<TensorInfo> tensors_from_python(py::handle tensors, uint64_t numel_total)
{
    if (tensors.is_none())
        return {};
    const nlohmann::json draft = {{"schema_version", kSchemaVersion},
                                  {"world_size", 1},
                                  {"step", 0},
                                  {"param_numel_total", numel_total},
                                  {"shards", nlohmann::json::array()},
                                  {"tensors", from_python(tensors, "tensors")}};
    try {
        return parse_manifest(draft.dump(), "tensors").tensors;
    } catch (const Error& e) { // the parser's sentence, as a complaint about the argument
        throw Error(ProblemKind::invalid_argument, e.what());
    }
}

py::object manifest_to_python(const Manifest& manifest)
{
    return to_python(nlohmann::json::parse(serialize_manifest(manifest)));
}

} // namespace shardscope::python
