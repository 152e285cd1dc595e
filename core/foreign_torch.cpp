#include "core/foreign_torch.h"

#include "core/foreign_common.h"
#include "core/foreign_dcp.h"
#include "core/pickle_reader.h"
#include "core/shardfile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;
using foreign::add_row;

namespace {

// torch.save records a storage's legacy typed class: FloatStorage -> float32, ...
std::pair<std::string, uint64_t> storage_dtype(std::string_view type)
{
    static const std::map<std::string_view, std::pair<std::string, uint64_t>> types = {
        {"FloatStorage", {"float32", 4}},       {"DoubleStorage", {"float64", 8}},
        {"HalfStorage", {"float16", 2}},        {"BFloat16Storage", {"bfloat16", 2}},
        {"LongStorage", {"int64", 8}},          {"IntStorage", {"int32", 4}},
        {"ShortStorage", {"int16", 2}},         {"CharStorage", {"int8", 1}},
        {"ByteStorage", {"uint8", 1}},          {"BoolStorage", {"bool", 1}},
        {"ComplexFloatStorage", {"complex64", 8}}, {"ComplexDoubleStorage", {"complex128", 16}},
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
    const auto& t = doc.at(pid).items;
    if (!doc.is(t[0], PickleKind::string) || doc.at(t[0]).text != "storage" || !doc.is(t[2], PickleKind::string))
        return std::nullopt;
    StorageRef ref;
    ref.key = doc.at(t[2]).text;
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
        const PickleValue& v = m_doc.at(id);
        auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
        auto key_text = [&](uint32_t k, std::size_t i) {
            if (m_doc.is(k, PickleKind::string))
                return m_doc.at(k).text;
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
        const PickleValue& args = m_doc.at(m_doc.at(id).items[1]);
        ForeignTensor t;
        t.name = name;
        if (!args.items.empty())
            if (const auto ref = storage_ref(m_doc, args.items[0])) {
                t.dtype = ref->dtype;
                t.detail = "storage " + ref->key;
                if (args.items.size() > 1)
                    if (const auto off = m_doc.as_int(args.items[1]); off && *off > 0)
                        t.detail += " + " + std::to_string(*off) + " elements";
                if (args.items.size() > 2)
                    if (const auto dims = m_doc.as_sequence(args.items[2])) {
                        uint64_t numel = 1;
                        for (const uint32_t d : *dims) {
                            const auto n = m_doc.as_int(d);
                            t.shape.push_back(n && *n >= 0 ? static_cast<uint64_t>(*n) : 0);
                            numel *= t.shape.back();
                        }
                        t.bytes = numel * ref->element;
                    }
            }
        m_out.tensors.push_back(std::move(t));
    }

    const PickleDocument& m_doc;
    TorchArchiveListing& m_out;
    std::vector<bool> m_seen;
};

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
        out.problems.push_back({ProblemKind::invalid_archive, -1, {},
                                display_path + ": no data.pkl entry: not a torch.save archive"});
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
                    out.problems.push_back({ProblemKind::missing_tensor, -1, {},
                                            display_path + ": data.pkl refers to storage '" + key +
                                                "' but the archive has no entry " + data_prefix + key});
            } else if (ref.element && ref.numel && s.entry_bytes != ref.numel * ref.element) {
                if (reported++ < 20)
                    out.problems.push_back({ProblemKind::size_mismatch, -1, {},
                                            display_path + ": storage '" + key + "' holds " + std::to_string(ref.numel) +
                                                " " + ref.dtype + " elements (" + std::to_string(ref.numel * ref.element) +
                                                " bytes) but its entry is " + std::to_string(s.entry_bytes) + " bytes"});
            }
        }
        TensorWalker(doc, out).walk(doc.root(), {}, 0);
    } catch (const Error& e) {
        out.problems.push_back({e.kind(), -1, {}, e.what()});
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

namespace {

// CRC-checks every entry of one .pt archive and lists its tensors (prefixed with the file name
// when `tensor_prefix` is set). Problems name the file and rank.
void check_torch_file(fsutil::OpenedFile& file, const std::string& shown, ShardCheck& check,
                      std::vector<Problem>& problems, std::vector<ForeignTensor>& tensors, uint64_t& tensors_total,
                      const VerifyOptions& options, bool check_data)
{
    auto add = [&](ProblemKind kind, const std::string& message) {
        problems.push_back({kind, check.rank, check.path, message});
    };
    const ZipReadAt read = zip_read_fd(file.fd.get());
    unsigned char magic[2] = {0, 0};
    if (file.size >= 2 && read(magic, 2, 0) && magic[0] == 0x80 && magic[1] == 0x02) {
        check.status = ShardStatus::invalid;
        check.detail = shown + ": legacy (non-zip, pre-1.6) torch.save format, which cannot be checked without unpickling";
        return add(ProblemKind::invalid_archive, check.detail);
    }
    ZipDirectory directory;
    try {
        directory = read_zip_directory(read, file.size, shown);
    } catch (const Error& e) {
        check.status = ShardStatus::invalid;
        check.detail = e.what();
        return add(e.kind(), e.what());
    }
    uint64_t base = 0;
    std::size_t bad_entries = 0;
    for (std::size_t i = 0; check_data && i < directory.entries.size(); ++i) {
        if (foreign::cancelled(options))
            return;
        const auto result = check_zip_entry(read, file.size, directory, i, options.cancel, [&](uint64_t done) {
            foreign::current_progress().advance(base + done);
        });
        base += directory.entries[i].compressed_size;
        if (result.ok || foreign::cancelled(options))
            continue;
        if (bad_entries++ < 20)
            add(result.crc_mismatch ? ProblemKind::crc_mismatch : ProblemKind::invalid_archive, shown + ": " + result.problem);
    }
    if (bad_entries > 20)
        add(ProblemKind::crc_mismatch, shown + ": " + std::to_string(bad_entries - 20) + " more bad entries");
    TorchArchiveListing listing = list_torch_archive(read, file.size, directory, shown);
    for (auto& p : listing.problems)
        add(p.kind, p.message);
    tensors_total += listing.tensors_total;
    uint64_t storage_bytes = 0;
    for (const auto& s : listing.storages)
        storage_bytes += s.entry_bytes;
    auto count = [](uint64_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
    check.detail = count(directory.entries.size(), "entry", "entries") + ", " +
                   count(listing.storages.size(), "storage", "storages") + " (" + human_bytes(storage_bytes) + "), " +
                   count(listing.tensors_total, "tensor", "tensors");
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

struct DeepSpeedName {
    enum Kind { model, zero_optim, zero_model, layer } kind = model;
    bool bf16 = false;
    int dp = -1, mp = -1, layer_index = -1;
    bool tagged_layer = false; // the layer file names its model-parallel rank
};

std::optional<DeepSpeedName> parse_deepspeed_name(std::string_view name)
{
    DeepSpeedName out;
    std::size_t p = 0;
    if (eat(name, p, "mp_rank_")) {
        out.mp = digits(name, p);
        if (out.mp >= 0 && eat(name, p, "_model_states.pt") && p == name.size())
            return out;
        return std::nullopt;
    }
    if (eat(name, p, "layer_")) {
        out.kind = DeepSpeedName::layer;
        out.layer_index = digits(name, p);
        if (out.layer_index < 0)
            return std::nullopt;
        // layer_XX-model_states.pt without model parallelism, layer_XX-model_YY-model_states.pt with
        if (eat(name, p, "-model_states.pt") && p == name.size()) {
            out.mp = 0;
            return out;
        }
        if (eat(name, p, "-model_") && (out.mp = digits(name, p)) >= 0 && eat(name, p, "-model_states.pt") &&
            p == name.size()) {
            out.tagged_layer = true;
            return out;
        }
        return std::nullopt;
    }
    out.bf16 = eat(name, p, "bf16_");
    if (!eat(name, p, "zero_pp_rank_") || (out.dp = digits(name, p)) < 0 || !eat(name, p, "_mp_rank_") ||
        (out.mp = digits(name, p)) < 0)
        return std::nullopt;
    if (eat(name, p, "_optim_states.pt") && p == name.size()) {
        out.kind = DeepSpeedName::zero_optim;
        return out;
    }
    if (eat(name, p, "_model_states.pt") && p == name.size()) {
        out.kind = DeepSpeedName::zero_model;
        return out;
    }
    return std::nullopt;
}

std::string two_digits(int v)
{
    char text[16];
    std::snprintf(text, sizeof text, "%02d", v);
    return text;
}

// Runs the archive checks over report.shards and fills the summary's tensor list.
void check_archives(int dirfd, VerifyReport& report, const VerifyOptions& options, ProblemKind missing_kind,
                    bool check_data)
{
    std::vector<std::vector<ForeignTensor>> tensors(report.shards.size());
    std::vector<uint64_t> totals(report.shards.size(), 0);
    foreign::check_files(
        dirfd, report, options,
        [&](std::size_t i, fsutil::OpenedFile& file, ShardCheck& check, std::vector<Problem>& problems) {
            check_torch_file(file, foreign::shown_file(report.dir, check), check, problems, tensors[i], totals[i], options,
                             check_data);
        },
        missing_kind);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        report.foreign->tensors_total += totals[i];
        for (auto& t : tensors[i])
            if (report.foreign->tensors.size() < foreign::kMaxListedTensors)
                report.foreign->tensors.push_back(std::move(t));
    }
}

// The highest-numbered `prefix<N>` directory name, or "".
std::string highest_numbered(const std::vector<std::string>& names, std::string_view prefix)
{
    std::string best;
    long long best_value = -1;
    for (const auto& n : names) {
        if (!n.starts_with(prefix))
            continue;
        std::size_t p = prefix.size();
        long long v = 0;
        while (p < n.size() && n[p] >= '0' && n[p] <= '9' && v < (1ll << 50))
            v = v * 10 + (n[p++] - '0');
        if (p == n.size() && p > prefix.size() && v > best_value) {
            best_value = v;
            best = n;
        }
    }
    return best;
}

} // namespace

VerifyReport verify_deepspeed(const fs::path& path, const VerifyOptions& options, bool check_data)
{
    VerifyReport report;
    report.format = "deepspeed";
    report.dir = path;
    report.foreign.emplace();
    ForeignSummary& summary = *report.foreign;
    add_row(summary, "format", "deepspeed");
    fsutil::UniqueFd dirfd = fsutil::open_directory(path);
    std::vector<std::string> names = list_directory(dirfd.get());
    std::string tag;
    try {
        if (fsutil::exists_at(dirfd.get(), "latest")) {
            const std::string display = (path / "latest").string();
            tag = foreign::read_tag_file(dirfd.get(), "latest", display);
            report.dir = foreign::confined_subdir(dirfd.get(), path, tag, display);
            add_row(summary, "tag", tag + " (from `latest`)");
        } else if (const std::string step = highest_numbered(names, "global_step"); !step.empty()) {
            tag = step;
            report.dir = foreign::confined_subdir(dirfd.get(), path, tag, path.string());
            add_row(summary, "tag", tag + " (no `latest`: the highest global_step folder)");
        }
    } catch (const Error& e) {
        report.problems.push_back(e.problem());
        return report;
    }
    if (!tag.empty()) {
        dirfd = fsutil::open_directory(report.dir);
        names = list_directory(dirfd.get());
    }
    std::sort(names.begin(), names.end());

    std::set<std::pair<int, int>> optim, zero_model;
    std::set<int> model;
    std::set<std::string> present;
    std::map<int, std::set<int>> layers; // pipeline layer index -> model-parallel ranks with a file
    // mp counts the model-parallel ranks of mp_rank_XX / zero_..._mp_rank_XX names (with pipeline
    // parallelism: stage x tensor slice); layer_mp the tensor slices of layer_NN-model_YY names.
    int dp = 0, mp = 0, layer_mp = 0;
    bool bf16 = false, tagged_layers = false;
    for (const auto& n : names) {
        const auto parsed = parse_deepspeed_name(n);
        if (!parsed)
            continue;
        present.insert(n);
        if (parsed->kind == DeepSpeedName::layer)
            layer_mp = std::max(layer_mp, parsed->mp + 1);
        else
            mp = std::max(mp, parsed->mp + 1);
        if (parsed->kind == DeepSpeedName::zero_optim) {
            optim.insert({parsed->dp, parsed->mp});
            dp = std::max(dp, parsed->dp + 1);
            bf16 = bf16 || parsed->bf16;
        } else if (parsed->kind == DeepSpeedName::zero_model) {
            zero_model.insert({parsed->dp, parsed->mp});
            dp = std::max(dp, parsed->dp + 1);
        } else if (parsed->kind == DeepSpeedName::model) {
            model.insert(parsed->mp);
        } else {
            layers[parsed->layer_index].insert(parsed->mp);
            tagged_layers = tagged_layers || parsed->tagged_layer;
        }
    }
    // Every file present is checked; every file the naming sequence implies but is absent is
    // reported missing (a rank whose save never finished).
    std::vector<std::pair<std::string, int>> files; // name, rank for messages
    for (const auto& n : present) {
        const auto parsed = parse_deepspeed_name(n);
        files.push_back({n, parsed->kind == DeepSpeedName::zero_optim || parsed->kind == DeepSpeedName::zero_model
                                ? parsed->dp : parsed->mp});
    }
    // Rank numbers come from file names, which anyone can write: the sequence they imply is
    // enumerated only up to a sane size, else reported as one problem.
    const int layer_ranks = tagged_layers ? layer_mp : 1;
    const uint64_t implied = static_cast<uint64_t>(dp) * static_cast<uint64_t>(mp) * 2 + static_cast<uint64_t>(mp) +
                             layers.size() * static_cast<uint64_t>(layer_ranks);
    if (implied > static_cast<uint64_t>(kMaxWorldSize)) {
        report.problems.push_back({ProblemKind::missing_shard, -1, {},
                                   report.dir.string() + ": the file names imply " + std::to_string(implied) +
                                       " files (data-parallel size " + std::to_string(dp) + ", model-parallel size " +
                                       std::to_string(mp) + "), more than the " + std::to_string(kMaxWorldSize) +
                                       " ranks ShardScope checks: a file name carries an implausible rank number"});
        return report;
    }
    const std::string optim_prefix = bf16 ? "bf16_zero_pp_rank_" : "zero_pp_rank_";
    for (int d = 0; d < dp; ++d)
        for (int m = 0; m < mp; ++m) {
            if (!optim.empty() && !optim.count({d, m}))
                files.push_back({optim_prefix + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_optim_states.pt", d});
            if (!zero_model.empty() && !zero_model.count({d, m}))
                files.push_back({"zero_pp_rank_" + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_model_states.pt", d});
        }
    if (!model.empty())
        for (int m = 0; m < mp; ++m)
            if (!model.count(m))
                files.push_back({"mp_rank_" + two_digits(m) + "_model_states.pt", m});
    // Every model-parallel rank saves its slice of each layer: a layer file present for one rank
    // and absent for another is a rank whose save never finished. Layer indices themselves may
    // skip (DeepSpeed saves no file for a layer without a state_dict), so those gaps are shown,
    // not reported.
    std::string absent_layers;
    int absent_count = 0;
    for (auto it = layers.begin(); it != layers.end(); ++it) {
        for (int m = 0; m < layer_ranks; ++m)
            if (!it->second.count(m))
                files.push_back({"layer_" + two_digits(it->first) +
                                     (tagged_layers ? "-model_" + two_digits(m) : std::string()) + "-model_states.pt",
                                 m});
        const auto next = std::next(it);
        if (next != layers.end() && next->first > it->first + 1) {
            absent_count += next->first - it->first - 1;
            if (absent_layers.size() < 200)
                absent_layers += (absent_layers.empty() ? "" : ", ") + std::to_string(it->first + 1) +
                                 (next->first > it->first + 2 ? "-" + std::to_string(next->first - 1) : std::string());
        }
    }
    for (const auto& [name, rank] : files)
        report.shards.push_back({rank, name, 0, 0, ShardStatus::pending, {}, {}});
    std::stable_sort(report.shards.begin(), report.shards.end(), [](const ShardCheck& a, const ShardCheck& b) {
        return a.path < b.path;
    });
    add_row(summary, "data-parallel size", dp ? std::to_string(dp) : std::string("- (no ZeRO files)"));
    add_row(summary, "model-parallel size", std::to_string(mp));
    if (!layers.empty()) {
        std::size_t layer_files = 0;
        for (const auto& [index, ranks] : layers)
            layer_files += ranks.size();
        add_row(summary, "pipeline layers",
                std::to_string(layers.size()) + " (" + std::to_string(layers.begin()->first) + " to " +
                    std::to_string(layers.rbegin()->first) + "), " + std::to_string(layer_files) + " layer files" +
                    (tagged_layers ? ", " + std::to_string(layer_mp) + " tensor slices each" : std::string()));
        if (absent_count)
            add_row(summary, "layer indices without a file",
                    absent_layers + " (" + std::to_string(absent_count) +
                        "; DeepSpeed writes none for a layer without parameters)");
    }
    add_row(summary, "files", std::to_string(present.size()) + " present, " +
                                  std::to_string(files.size() - present.size()) + " missing from the rank sequence");
    if (files.empty()) {
        report.problems.push_back({ProblemKind::missing_shard, -1, {},
                                   report.dir.string() + ": no DeepSpeed model or optimizer state files"});
        return report;
    }
    check_archives(dirfd.get(), report, options, ProblemKind::missing_shard, check_data);
    add_row(summary, "tensors", std::to_string(summary.tensors_total));
    return report;
}

VerifyReport verify_megatron(const fs::path& path, const VerifyOptions& options, bool check_data)
{
    fs::path dir = path;
    std::vector<std::pair<std::string, std::string>> rows = {{"format", "megatron"}};
    VerifyReport failed;
    failed.format = "megatron";
    failed.dir = path;
    failed.foreign.emplace();
    try {
        fsutil::UniqueFd rootfd = fsutil::open_directory(path);
        const auto names = list_directory(rootfd.get());
        if (fsutil::exists_at(rootfd.get(), "latest_checkpointed_iteration.txt")) {
            const std::string display = (path / "latest_checkpointed_iteration.txt").string();
            const std::string text = foreign::read_tag_file(rootfd.get(), "latest_checkpointed_iteration.txt", display);
            std::string name = text;
            if (text != "release") {
                std::size_t p = 0;
                const int iteration = digits(text, p);
                if (iteration < 0 || p != text.size())
                    throw Error(ProblemKind::invalid_manifest,
                                display + ": '" + text.substr(0, 100) + "' is neither an iteration number nor 'release'",
                                display);
                char buffer[32];
                std::snprintf(buffer, sizeof buffer, "iter_%07d", iteration);
                name = buffer;
            }
            dir = foreign::confined_subdir(rootfd.get(), path, name, display);
            rows.push_back({"iteration", text + " (from latest_checkpointed_iteration.txt)"});
        } else if (const std::string iter = highest_numbered(names, "iter_"); !iter.empty()) {
            dir = foreign::confined_subdir(rootfd.get(), path, iter, path.string());
            rows.push_back({"iteration", iter + " (no tracker file: the highest iter_ folder)"});
        }
    } catch (const Error& e) {
        failed.problems.push_back(e.problem());
        return failed;
    }

    fsutil::UniqueFd dirfd = fsutil::open_directory(dir);
    std::vector<std::string> names = list_directory(dirfd.get());
    std::sort(names.begin(), names.end());
    if (fsutil::exists_at(dirfd.get(), "metadata.json")) {
        try {
            const std::string text =
                fsutil::read_small_file(dirfd.get(), "metadata.json", 1 << 20, (dir / "metadata.json").string());
            const auto json = nlohmann::json::parse(text);
            if (json.is_object())
                for (const auto& [key, value] : json.items())
                    rows.push_back({"metadata.json " + key, value.is_string() ? value.get<std::string>() : value.dump()});
        } catch (const std::exception& e) {
            rows.push_back({"metadata.json", std::string("unreadable: ") + e.what()});
        }
    }
    // The summary a viewer gets before the files are checked already says Megatron, with the rows
    // known by then.
    auto as_megatron = [&rows](VerifyReport& report) {
        report.format = "megatron";
        if (!report.foreign)
            report.foreign.emplace();
        auto& existing = report.foreign->rows;
        if (!existing.empty() && existing.front().first == "format")
            existing.erase(existing.begin());
        existing.insert(existing.begin(), rows.begin(), rows.end());
    };
    VerifyOptions inner = options;
    if (options.callbacks.files_listed)
        inner.callbacks.files_listed = [&](const VerifyReport& listed) {
            VerifyReport shown = listed;
            as_megatron(shown);
            options.callbacks.files_listed(shown);
        };
    VerifyReport report;
    if (fsutil::exists_at(dirfd.get(), ".metadata")) {
        rows.push_back({"layout", "distributed checkpoint (torch_dist / DCP)"});
        report = verify_dcp(dir, inner, check_data);
    } else {
        rows.push_back({"layout", "per-rank mp_rank_XX[_PPP]/model_optim_rng.pt"});
        report.dir = dir;
        report.foreign.emplace();
        std::set<std::pair<int, int>> present; // (tp, pp)
        std::map<std::pair<int, int>, std::string> folder;
        int tp = 0, pp = 0;
        bool has_pp = false;
        for (const auto& n : names) {
            std::size_t p = 0;
            if (!eat(n, p, "mp_rank_"))
                continue;
            const int t = digits(n, p);
            int s = 0;
            if (p < n.size()) {
                if (!eat(n, p, "_") || (s = digits(n, p)) < 0)
                    continue;
                has_pp = true;
            }
            if (t < 0 || p != n.size())
                continue;
            present.insert({t, s});
            folder[{t, s}] = n;
            tp = std::max(tp, t + 1);
            pp = std::max(pp, s + 1);
        }
        for (int t = 0; t < tp; ++t)
            for (int s = 0; s < pp; ++s) {
                std::string name = folder.count({t, s}) ? folder[{t, s}] : "mp_rank_" + two_digits(t);
                if (!folder.count({t, s}) && has_pp) {
                    char buffer[16];
                    std::snprintf(buffer, sizeof buffer, "_%03d", s);
                    name += buffer;
                }
                report.shards.push_back({t * pp + s, name + "/model_optim_rng.pt", 0, 0, ShardStatus::pending, {}, {}});
                if (folder.count({t, s}) && fsutil::exists_at(dirfd.get(), name + "/distrib_optim.pt"))
                    report.shards.push_back({t * pp + s, name + "/distrib_optim.pt", 0, 0, ShardStatus::pending, {}, {}});
            }
        rows.push_back({"tensor-parallel size", std::to_string(tp)});
        rows.push_back({"pipeline-parallel size", std::to_string(pp)});
        if (report.shards.empty())
            report.problems.push_back({ProblemKind::missing_shard, -1, {},
                                       dir.string() + ": no .metadata and no mp_rank_XX folders"});
        else
            check_archives(dirfd.get(), report, inner, ProblemKind::missing_shard, check_data);
        rows.push_back({"tensors", std::to_string(report.foreign->tensors_total)});
    }
    as_megatron(report);
    return report;
}

} // namespace shardscope
