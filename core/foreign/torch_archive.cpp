#include "core/foreign/torch_archive.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/torch_files.h"
#include "core/foreign/io/pickle_reader.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <span>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;
using foreign::add_row;

namespace {

// torch.save records a storage's legacy typed class: FloatStorage -> float32, ...
std::pair<std::string, uint64_t> storage_dtype(std::string_view type)
{
    static const std::map<std::string_view, std::pair<std::string, uint64_t>> types = {
        {"FloatStorage", {"float32", 4}},
        {"DoubleStorage", {"float64", 8}},
        {"HalfStorage", {"float16", 2}},
        {"BFloat16Storage", {"bfloat16", 2}},
        {"LongStorage", {"int64", 8}},
        {"IntStorage", {"int32", 4}},
        {"ShortStorage", {"int16", 2}},
        {"CharStorage", {"int8", 1}},
        {"ByteStorage", {"uint8", 1}},
        {"BoolStorage", {"bool", 1}},
        {"ComplexFloatStorage", {"complex64", 8}},
        {"ComplexDoubleStorage", {"complex128", 16}},
        {"UntypedStorage", {"uint8", 1}},
    };
    const auto it = types.find(type);
    return it == types.end() ? std::pair<std::string, uint64_t>{std::string(type), 0} : it->second;
}

struct StorageRef {
    std::string key;
    std::string dtype;
    uint64_t element = 0;
    uint64_t numel = 0;
};

// ('storage', <global torch.XStorage>, key, location, numel)
std::optional<StorageRef> storage_ref(const PickleDocument& doc, uint32_t pid_node)
{
    if (!doc.is(pid_node, PickleKind::persistent_id) || doc.at(pid_node).items.empty())
        return std::nullopt;
    const uint32_t pid = doc.at(pid_node).items[0];
    if (!doc.is(pid, PickleKind::tuple) || doc.at(pid).items.size() < 5)
        return std::nullopt;
    const auto t = doc.at(pid).items; // a span into the document
    if (!doc.is(t[0], PickleKind::string) || doc.at(t[0]).text != "storage" || !doc.is(t[2], PickleKind::string))
        return std::nullopt;
    StorageRef ref;
    ref.key = std::string(doc.at(t[2]).text);
    if (doc.is(t[1], PickleKind::global))
        std::tie(ref.dtype, ref.element) = storage_dtype(doc.at(t[1]).name);
    if (const auto n = doc.as_int(t[4]); n && *n >= 0)
        ref.numel = static_cast<uint64_t>(*n);
    return ref;
}

// Finds tensors (torch._utils._rebuild_tensor_v2 records) under the pickle's root, naming each by
// its path of dict keys / list indices, like a state_dict's dotted names.
class TensorWalker {
public:
    TensorWalker(const PickleDocument& doc, TorchArchiveListing& out) : m_doc(doc), m_out(out), m_seen(doc.size()) {}

    void walk(uint32_t id, const std::string& path, int depth)
    {
        if (id >= m_doc.size() || depth > 48 || m_seen[id])
            return;
        m_seen[id] = true; // shared and cyclic references are visited once
        const PickleValue v = m_doc.at(id);
        auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
        auto key_text = [&](uint32_t k, std::size_t i) {
            if (m_doc.is(k, PickleKind::string))
                return std::string(m_doc.at(k).text);
            if (const auto n = m_doc.as_int(k))
                return std::to_string(*n);
            return "[" + std::to_string(i) + "]";
        };
        switch (v.kind) {
        case PickleKind::dict:
            for (std::size_t i = 0; i + 1 < v.items.size(); i += 2)
                walk(v.items[i + 1], child(key_text(v.items[i], i / 2)), depth + 1);
            break;
        case PickleKind::list:
        case PickleKind::tuple:
            for (std::size_t i = 0; i < v.items.size(); ++i)
                walk(v.items[i], child(std::to_string(i)), depth + 1);
            break;
        case PickleKind::reduce:
        case PickleKind::new_object: {
            const std::string cls = m_doc.class_name(id);
            if (cls == "torch._utils._rebuild_tensor_v2" || cls == "torch._utils._rebuild_tensor") {
                record(id, path.empty() ? std::string("<root>") : path);
                break;
            }
            for (std::size_t i = 0; i + 1 < v.dict_items.size(); i += 2) // OrderedDict's items
                walk(v.dict_items[i + 1], child(key_text(v.dict_items[i], i / 2)), depth + 1);
            for (std::size_t i = 0; i < v.list_items.size(); ++i)
                walk(v.list_items[i], child(std::to_string(i)), depth + 1);
            if (v.items.size() > 1)
                walk(v.items[1], path, depth + 1);
            if (v.state != kNoPickleValue)
                walk(v.state, path, depth + 1);
            break;
        }
        default: break;
        }
    }

private:
    void record(uint32_t id, const std::string& name)
    {
        ++m_out.tensors_total;
        if (m_out.tensors.size() >= foreign::kMaxListedTensors)
            return;
        const PickleValue args = m_doc.at(m_doc.at(id).items[1]);
        ForeignTensor t;
        t.name = name;
        TorchTensorRef where{.name = name};
        if (!args.items.empty())
            if (const auto ref = storage_ref(m_doc, args.items[0])) {
                t.dtype = where.dtype = ref->dtype;
                where.storage_key = ref->key;
                t.detail = "storage " + ref->key;
                if (args.items.size() > 1)
                    if (const auto off = m_doc.as_int(args.items[1]); off && *off != 0) {
                        t.detail += " + " + std::to_string(*off) + " elements";
                        // A negative offset cannot be honoured: make it one no storage holds.
                        where.storage_offset = *off > 0 ? static_cast<uint64_t>(*off) : UINT64_MAX;
                    }
                if (args.items.size() > 2)
                    if (const auto dims = m_doc.as_sequence(args.items[2])) {
                        uint64_t numel = 1;
                        for (const uint32_t d : *dims) {
                            const auto n = m_doc.as_int(d);
                            t.shape.push_back(n && *n >= 0 ? static_cast<uint64_t>(*n) : 0);
                            numel *= t.shape.back();
                        }
                        t.bytes = numel * ref->element;
                        where.shape = t.shape;
                    }
                if (args.items.size() > 3)
                    if (const auto strides = m_doc.as_sequence(args.items[3]))
                        for (const uint32_t d : *strides)
                            where.stride.push_back(m_doc.as_int(d).value_or(-1));
            }
        m_out.tensors.push_back(std::move(t));
        m_out.refs.push_back(std::move(where));
    }

    const PickleDocument& m_doc;
    TorchArchiveListing& m_out;
    std::vector<bool> m_seen;
};

// The key/value ids of a dict, or of a dict-like object built by pickle (an OrderedDict's SETITEMS).
std::span<const uint32_t> dict_entries(const PickleDocument& doc, uint32_t id)
{
    if (id >= doc.size())
        return {};
    const PickleValue v = doc.at(id);
    return v.kind == PickleKind::dict ? v.items : v.dict_items;
}

// The ZeRO stage as DeepSpeed saves it: an int, or a member of its ZeroStageEnum, which Python
// pickles as a call of the class with the value (ZeroStageEnum(2)) or, from Python 3.11, as
// getattr(ZeroStageEnum, "gradients").
std::optional<int64_t> zero_stage_value(const PickleDocument& doc, uint32_t id)
{
    if (const auto n = doc.as_int(id))
        return n;
    if (!doc.is(id, PickleKind::reduce) || doc.at(id).items.size() < 2)
        return std::nullopt;
    const auto args = doc.as_sequence(doc.at(id).items[1]);
    if (!args)
        return std::nullopt;
    if (args->size() == 1)
        return doc.as_int((*args)[0]);
    const std::string callable = doc.class_name(doc.at(id).items[0]);
    if (args->size() != 2 || (callable != "builtins.getattr" && callable != "__builtin__.getattr") ||
        !doc.class_name((*args)[0]).ends_with("ZeroStageEnum"))
        return std::nullopt;
    static constexpr std::string_view kMembers[] = {"disabled", "optimizer_states", "gradients", "weights"};
    const auto member = doc.as_string((*args)[1]);
    for (std::size_t i = 0; member && i < std::size(kMembers); ++i)
        if (*member == kMembers[i])
            return static_cast<int64_t>(i);
    return std::nullopt;
}

// What zero_fields copies out of a document: its values may be shared, so a small hostile pickle
// can name one long list or string many times. Past these counts the fields are marked truncated
// and not used.
struct CopyBudget {
    uint64_t items = uint64_t(1) << 22; // names and dimensions
    uint64_t bytes = uint64_t(64) << 20; // of names

    bool take(uint64_t n, uint64_t name_bytes)
    {
        if (n > items || name_bytes > bytes) {
            items = bytes = 0; // and nothing more after
            return false;
        }
        items -= n;
        bytes -= name_bytes;
        return true;
    }
};

// name -> torch.Size entries of a dict, in order; entries that are not a str and a shape are left out
// (the assembly then finds a parameter missing and says so).
DeepSpeedZeroFields::Shapes shapes_of(const PickleDocument& doc, uint32_t id, CopyBudget& budget, bool& truncated)
{
    DeepSpeedZeroFields::Shapes out;
    const auto kv = dict_entries(doc, id);
    for (std::size_t i = 0; i + 1 < kv.size() && !truncated; i += 2) {
        const auto name = doc.as_string(kv[i]);
        const auto dims = doc.as_sequence(kv[i + 1]);
        if (!name || !dims)
            continue;
        if (!budget.take(1 + dims->size(), name->size())) {
            truncated = true;
            break;
        }
        std::vector<uint64_t> shape;
        for (const uint32_t d : *dims) {
            const auto n = doc.as_int(d);
            if (!n || *n < 0)
                break;
            shape.push_back(static_cast<uint64_t>(*n));
        }
        if (shape.size() == dims->size())
            out.push_back({std::string(*name), std::move(shape)});
    }
    return out;
}

MegatronArgs megatron_args(const PickleDocument& doc)
{
    MegatronArgs out;
    const uint32_t root = doc.root();
    if (const uint32_t version = doc.dict_get(root, "checkpoint_version"); doc.is(version, PickleKind::floating))
        out.checkpoint_version = doc.at(version).floating;
    else if (const auto whole = doc.as_int(version))
        out.checkpoint_version = double(*whole);
    const uint32_t args = doc.dict_get(root, "args");
    if (args == kNoPickleValue || doc.class_name(args) != "argparse.Namespace")
        return out;
    // Absent or None: unset. A size below `least` or absurdly large is not one Megatron ran with:
    // the args are not used at all.
    const auto size = [&](std::string_view key, int64_t least = 1) -> std::optional<int64_t> {
        const uint32_t id = doc.attribute(args, key);
        if (id == kNoPickleValue || doc.is(id, PickleKind::none))
            return std::nullopt;
        const auto n = doc.as_int(id);
        if (n && *n >= least && *n <= (1 << 20))
            return n;
        out.invalid = true;
        return std::nullopt;
    };
    const auto flag = [&](std::string_view key) {
        const uint32_t id = doc.attribute(args, key);
        return doc.is(id, PickleKind::boolean) && doc.at(id).boolean;
    };
    out.tensor_parallel = size("tensor_model_parallel_size");
    out.pipeline_parallel = size("pipeline_model_parallel_size");
    out.expert_parallel = size("expert_model_parallel_size");
    out.virtual_pipeline = size("virtual_pipeline_model_parallel_size");
    out.encoder_pipeline = size("encoder_pipeline_model_parallel_size", 0);
    out.expert_tensor_parallel = size("expert_tensor_parallel_size");
    out.distributed_optimizer = flag("use_distributed_optimizer") && !flag("no_save_optim");
    return out;
}

DeepSpeedZeroFields zero_fields(const PickleDocument& doc)
{
    DeepSpeedZeroFields out;
    CopyBudget budget;
    const uint32_t root = doc.root();
    if (const uint32_t groups = doc.dict_get(root, "param_shapes"); groups != kNoPickleValue) {
        out.model_file = true;
        if (const auto list = doc.as_sequence(groups)) {
            for (const uint32_t g : *list)
                if (budget.take(1, 0))
                    out.param_shapes.push_back(shapes_of(doc, g, budget, out.truncated));
                else
                    out.truncated = true;
        } else { // a single dict (older saves)
            out.param_shapes.push_back(shapes_of(doc, groups, budget, out.truncated));
        }
    }
    out.frozen_param_shapes = shapes_of(doc, doc.dict_get(root, "frozen_param_shapes"), budget, out.truncated);
    if (const auto names = doc.as_sequence(doc.dict_get(root, "buffer_names")))
        for (const uint32_t n : *names)
            if (const auto text = doc.as_string(n); text && !out.truncated)
                if (!(out.truncated = !budget.take(1, text->size())))
                    out.buffer_names.emplace_back(*text);
    const auto shared = dict_entries(doc, doc.dict_get(root, "shared_params"));
    for (std::size_t i = 0; i + 1 < shared.size() && !out.truncated; i += 2)
        if (const auto alias = doc.as_string(shared[i]), source = doc.as_string(shared[i + 1]); alias && source)
            if (!(out.truncated = !budget.take(2, alias->size() + source->size())))
                out.shared_params.push_back({std::string(*alias), std::string(*source)});
    if (out.truncated) { // nothing of it is used: keep no copy either
        out.param_shapes.clear();
        out.frozen_param_shapes.clear();
        out.buffer_names.clear();
        out.shared_params.clear();
    }
    const uint32_t optimizer = doc.dict_get(root, "optimizer_state_dict");
    if (const auto stage = zero_stage_value(doc, doc.dict_get(optimizer, "zero_stage")); stage && *stage > 0)
        out.zero_stage = *stage;
    else if (doc.dict_get(optimizer, "single_partition_of_fp32_groups") != kNoPickleValue)
        out.zero_stage = 1; // DeepSpeed's BF16_Optimizer (ZeRO stage 1) saves no zero_stage
    const uint32_t count = doc.dict_get(optimizer, "partition_count");
    if (const auto n = doc.as_int(count))
        out.partition_count = *n;
    else if (const auto list = doc.as_sequence(count))
        for (const uint32_t c : *list)
            out.partition_count = std::max(out.partition_count, doc.as_int(c).value_or(0));
    return out;
}

} // namespace

TorchArchiveListing list_torch_archive(const ZipReadAt& read, uint64_t file_size, const ZipDirectory& directory,
                                       const std::string& display_path)
{
    TorchArchiveListing out;
    std::size_t pickle_index = directory.entries.size();
    for (std::size_t i = 0; i < directory.entries.size(); ++i) {
        const std::string& name = directory.entries[i].name;
        if (name == "data.pkl" || name.ends_with("/data.pkl")) {
            pickle_index = i;
            out.prefix = name.substr(0, name.size() - std::string_view("data.pkl").size());
            break;
        }
    }
    if (pickle_index == directory.entries.size()) {
        out.problems.push_back({.kind = ProblemKind::invalid_archive,
                                .message = display_path + ": no data.pkl entry: not a torch.save archive"});
        return out;
    }
    std::map<std::string, TorchStorage> storages;
    const std::string data_prefix = out.prefix + "data/";
    for (const auto& entry : directory.entries)
        if (entry.name.starts_with(data_prefix) && entry.name.size() > data_prefix.size()) {
            TorchStorage& s = storages[entry.name.substr(data_prefix.size())];
            s.key = entry.name.substr(data_prefix.size());
            s.entry_bytes = entry.uncompressed_size;
            s.has_entry = true;
        }
    try {
        const std::string pickle =
            read_zip_entry(read, file_size, directory, pickle_index, kMaxTorchPickleBytes, display_path);
        const PickleDocument doc = parse_pickle(pickle, display_path + ": " + out.prefix + "data.pkl");
        std::map<std::string, StorageRef> refs;
        for (uint32_t id = 0; id < doc.size(); ++id)
            if (const auto ref = storage_ref(doc, id))
                refs.emplace(ref->key, *ref);
        std::size_t reported = 0;
        for (const auto& [key, ref] : refs) {
            TorchStorage& s = storages[key];
            s.key = key;
            s.dtype = ref.dtype;
            s.numel = ref.numel;
            if (!s.has_entry) {
                if (reported++ < 20)
                    out.problems.push_back({.kind = ProblemKind::missing_tensor,
                                            .message = display_path + ": data.pkl refers to storage '" + key +
                                                "' but the archive has no entry " + data_prefix + key});
            } else if (ref.element && ref.numel && s.entry_bytes != ref.numel * ref.element) {
                if (reported++ < 20)
                    out.problems.push_back({.kind = ProblemKind::size_mismatch,
                                            .message = display_path + ": storage '" + key + "' holds " +
                                                std::to_string(ref.numel) + " " + ref.dtype + " elements (" +
                                                std::to_string(ref.numel * ref.element) + " bytes) but its entry is " +
                                                std::to_string(s.entry_bytes) + " bytes"});
            }
        }
        TensorWalker(doc, out).walk(doc.root(), {}, 0);
        out.zero = zero_fields(doc);
        out.megatron = megatron_args(doc);
    } catch (const Error& e) {
        rethrow_remote(e);
        out.problems.push_back({.kind = e.kind(), .message = e.what()});
    }
    for (auto& [key, s] : storages)
        out.storages.push_back(std::move(s));
    return out;
}

TorchArchiveListing list_torch_archive(std::string_view file, const std::string& display_path)
{
    const ZipReadAt read = zip_read_memory(file);
    const ZipDirectory directory = read_zip_directory(read, file.size(), display_path);
    return list_torch_archive(read, file.size(), directory, display_path);
}

namespace foreign {

// CRC-checks every entry of one .pt archive and lists its tensors (prefixed with the file name
// when `tensor_prefix` is set). Problems name the file and rank.
void check_torch_file(storage::OpenedObject& file, const std::string& shown, ShardCheck& check,
                      std::vector<Problem>& problems, std::vector<ForeignTensor>& tensors, uint64_t& tensors_total,
                      const VerifyOptions& options, bool check_data, MegatronArgs& megatron, int64_t& zero_partitions)
{
    auto add = [&](ProblemKind kind, const std::string& message) {
        problems.push_back({.kind = kind, .message = message, .path = check.path, .rank = check.rank});
    };
    const ZipReadAt read = storage::read_function(*file.reader);
    unsigned char magic[2] = {0, 0};
    if (file.size >= 2 && read(magic, 2, 0) && magic[0] == 0x80 && magic[1] == 0x02) {
        check.status = ShardStatus::invalid;
        check.detail =
            shown + ": legacy (non-zip, pre-1.6) torch.save format, which cannot be checked without unpickling";
        return add(ProblemKind::invalid_archive, check.detail);
    }
    ZipDirectory directory;
    try {
        directory = read_zip_directory(read, file.size, shown);
    } catch (const Error& e) {
        rethrow_remote(e);
        check.status = ShardStatus::invalid;
        check.detail = e.what();
        return add(e.kind(), e.what());
    }
    uint64_t base = 0;
    std::size_t bad_entries = 0;
    for (std::size_t i = 0; check_data && i < directory.entries.size(); ++i) {
        if (foreign::cancelled(options))
            return;
        const auto result = check_zip_entry(read, file.size, directory, i, options.cancel,
                                            [&](uint64_t done) { foreign::current_progress().advance(base + done); });
        base += directory.entries[i].compressed_size;
        if (result.ok || foreign::cancelled(options))
            continue;
        if (bad_entries++ < 20)
            add(result.crc_mismatch ? ProblemKind::crc_mismatch : ProblemKind::invalid_archive,
                shown + ": " + result.problem);
    }
    if (bad_entries > 20)
        add(ProblemKind::crc_mismatch, shown + ": " + std::to_string(bad_entries - 20) + " more bad entries");
    TorchArchiveListing listing = list_torch_archive(read, file.size, directory, shown);
    megatron = listing.megatron;
    if (listing.zero.zero_stage > 0 && !listing.zero.truncated)
        zero_partitions = listing.zero.partition_count;
    for (auto& p : listing.problems)
        add(p.kind, p.message);
    tensors_total += listing.tensors_total;
    uint64_t storage_bytes = 0;
    for (const auto& s : listing.storages)
        storage_bytes += s.entry_bytes;
    auto count = [](uint64_t n, const char* one, const char* many) {
        return std::to_string(n) + " " + (n == 1 ? one : many);
    };
    check.detail = count(directory.entries.size(), "entry", "entries") + ", " +
        count(listing.storages.size(), "storage", "storages") + " (" + human_bytes(storage_bytes) + "), " +
        count(listing.tensors_total, "tensor", "tensors");
    // What DeepSpeed ZeRO saved beside the tensors: the stage, and the parameters the model file lists.
    if (listing.zero.zero_stage > 0)
        check.detail += "; ZeRO stage " + std::to_string(listing.zero.zero_stage) + " partition" +
            (listing.zero.partition_count > 0 ? " of " + std::to_string(listing.zero.partition_count) : std::string());
    if (listing.zero.model_file && !listing.zero.truncated) {
        uint64_t parameters = 0;
        for (const auto& group : listing.zero.param_shapes)
            parameters += group.size();
        check.detail += "; param_shapes: " + count(parameters, "parameter", "parameters") + " in " +
            count(listing.zero.param_shapes.size(), "group", "groups");
    }
    for (auto& t : listing.tensors) {
        t.file = check.path;
        tensors.push_back(std::move(t));
    }
}

// Digits at `pos` of `s` (advancing it), or -1.
int digits(std::string_view s, std::size_t& pos)
{
    const std::size_t start = pos;
    int value = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9' && value < 1'000'000)
        value = value * 10 + (s[pos++] - '0');
    return pos > start ? value : -1;
}

bool eat(std::string_view s, std::size_t& pos, std::string_view literal)
{
    if (s.substr(pos, literal.size()) != literal)
        return false;
    pos += literal.size();
    return true;
}

// Runs the archive checks over report.shards and fills the summary's tensor list.
void check_archives(const storage::Folder& folder, VerifyReport& report, const VerifyOptions& options,
                    ProblemKind missing_kind, bool check_data, std::vector<MegatronArgs>* megatron,
                    std::vector<int64_t>* zero_partitions)
{
    std::vector<std::vector<ForeignTensor>> tensors(report.shards.size());
    std::vector<uint64_t> totals(report.shards.size(), 0);
    std::vector<MegatronArgs> args(report.shards.size());
    std::vector<int64_t> partitions(report.shards.size(), 0);
    foreign::check_files(
        folder, report, options,
        [&](std::size_t i, storage::OpenedObject& file, ShardCheck& check, std::vector<Problem>& problems) {
            check_torch_file(file, foreign::shown_file(report.dir, check), check, problems, tensors[i], totals[i],
                             options, check_data, args[i], partitions[i]);
        },
        missing_kind);
    if (megatron)
        *megatron = std::move(args);
    if (zero_partitions)
        *zero_partitions = std::move(partitions);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        report.foreign->tensors_total += totals[i];
        for (auto& t : tensors[i])
            if (report.foreign->tensors.size() < foreign::kMaxListedTensors)
                report.foreign->tensors.push_back(std::move(t));
    }
}

std::string two_digits(int v)
{
    char text[16];
    std::snprintf(text, sizeof text, "%02d", v);
    return text;
}

} // namespace foreign

} // namespace shardscope
