// Decoding DCP's .metadata (a pickled Metadata object) into plain DcpMetadata, through the
// restricted pickle machine (io/pickle_machine.h): nothing is imported or called.
//
// A large FSDP job's .metadata describes 10^5 chunks in millions of opcodes, most of them the
// wrappers around a few numbers (a ChunkStorageMetadata object, its state dict, two torch.Size
// reductions, their argument tuples). Building the whole tree first (PickleDocument) costs ~50 bytes
// per opcode. So this Store folds each DCP object into a compact record when BUILD completes it,
// and gives the object's subtree back at once when nothing else can reach it: memory follows what
// the metadata describes. "Nothing else can reach it" is exact, not a guess:
//   - a memo entry: a first, stackless scan of the opcodes (scan_memo_use) finds which memo
//     entries are ever fetched; only those are kept, and a kept one pins what it holds;
//   - the stack: only the object itself is above the values older than it (DUP pins);
//   - an older container or object changed since the object was made (tracked as "touches").
// Kept values (strings, globals, ints, floats, tuples of ints, the records) are never given back;
// scratch values (containers, objects) are, from the object being folded to the end.
//
// Pass one is dcp_metadata_scan.cpp; the store internal/dcp_store.h, what each object folds into
// dcp_metadata_fold.cpp. Here: BUILD's side of the store, which the machine's loop calls (so it is
// compiled with it), and the decoder that reads the records left.

#include "core/foreign/dcp.h"

#include "core/foreign/internal/dcp_metadata.h"
#include "core/foreign/internal/dcp_store.h"
#include "core/foreign/io/pickle_machine.h"
#include "core/util/error.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace shardscope {

uint64_t torch_dtype_size(std::string_view dtype)
{
    static const std::map<std::string_view, uint64_t> sizes = {
        {"float32", 4},     {"float", 4},           {"float64", 8},         {"double", 8},    {"float16", 2},
        {"half", 2},        {"bfloat16", 2},        {"int64", 8},           {"long", 8},      {"int32", 4},
        {"int", 4},         {"int16", 2},           {"short", 2},           {"int8", 1},      {"uint8", 1},
        {"bool", 1},        {"uint16", 2},          {"uint32", 4},          {"uint64", 8},    {"complex64", 8},
        {"cfloat", 8},      {"complex128", 16},     {"cdouble", 16},        {"complex32", 4}, {"float8_e4m3fn", 1},
        {"float8_e5m2", 1}, {"float8_e4m3fnuz", 1}, {"float8_e5m2fnuz", 1},
    };
    const auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

} // namespace shardscope

namespace shardscope::foreign::dcp {

// ---- folding: BUILD completes an object; DCP's become records
inline uint32_t DcpStore::build(uint32_t target, uint32_t state, uint32_t under)
{
    if (!is_scratch(target))
        fail("BUILD on an object already built and read (a second BUILD)");
    touch(target); // an older object, built now, may hold newer values
    object_field(target, state_field) = state;
    Folded f = fold(target, false);
    if (f.value.fold == Fold::none)
        return target;
    if (f.value.fold == Fold::tensor && m_first_tensors)
        note_first_tensor(under, f.value.a);
    const uint32_t record = keep(f.value);
    object_field(target, folded_field) = record;
    reclaim(target);
    return record;
}

// Appends a tensor record's tensor and its chunks' offsets and sizes to `out`, calling
// `each_chunk(chunk, its offsets)` for every chunk before it is added (where its storage is
// filled in). False, with the tensor not added, past kMaxDcpDimensionValues in all.
template <class EachChunk>
bool DcpStore::append_tensor(DcpMetadata& out, std::string_view fqn, const TensorRecord& t,
                             EachChunk&& each_chunk) const
{
    DcpTensor tensor;
    tensor.fqn = fqn;
    tensor.dtype = std::string(global_name(value(t.properties).a));
    tensor.size = dims(t.size);
    tensor.first_chunk = static_cast<uint32_t>(out.chunks.size());
    tensor.chunk_count = t.chunks_count;
    const std::size_t numbers_at = out.numbers.size();
    for (uint32_t c = 0; c < t.chunks_count; ++c) {
        const Value record = value(m_tensor_chunks[t.chunks_begin + c]);
        const Value offsets = value(record.a), sizes = value(static_cast<uint32_t>(record.b));
        if (out.numbers.size() + offsets.a + sizes.a > kMaxDcpDimensionValues) {
            out.chunks.resize(tensor.first_chunk);
            out.numbers.resize(numbers_at);
            return false;
        }
        DcpChunk chunk;
        chunk.offsets_at = static_cast<uint32_t>(out.numbers.size());
        chunk.offsets_rank = static_cast<uint16_t>(offsets.a);
        out.numbers.insert(out.numbers.end(), m_numbers.begin() + offsets.b, m_numbers.begin() + offsets.b + offsets.a);
        chunk.sizes_at = static_cast<uint32_t>(out.numbers.size());
        chunk.sizes_rank = static_cast<uint16_t>(sizes.a);
        out.numbers.insert(out.numbers.end(), m_numbers.begin() + sizes.b, m_numbers.begin() + sizes.b + sizes.a);
        each_chunk(chunk, std::span<const int64_t>(m_numbers).subspan(offsets.b, offsets.a));
        out.chunks.push_back(chunk);
    }
    out.tensors.push_back(std::move(tensor));
    return true;
}

// The first tensors read, named by the str under each on the stack (a dict is pickled key,
// then value: state_dict_metadata's key), handed to m_first_tensors once kDcpFirstTensors of
// them are, so that a viewer lists them while the rest of a long .metadata is read. Only a
// preview: the decode itself names the tensors by the dict they end up in.
inline void DcpStore::note_first_tensor(uint32_t under, uint32_t record)
{
    if (under == kNoPickleValue || value(under).kind != PickleKind::string)
        return;
    m_first_named.emplace_back(under, record);
    if (m_first_named.size() < kDcpFirstTensors)
        return;
    DcpMetadata first;
    first.pickle_protocol = m_protocol;
    for (const auto& [key, t] : m_first_named)
        if (first.chunks.size() + m_tensors[t].chunks_count > kDcpFirstChunks ||
            !append_tensor(first, text_of(value(key)), m_tensors[t], [](DcpChunk&, std::span<const int64_t>) {}))
            break; // (a crafted file can give 256 tensors millions of chunks)
    const auto call = std::move(m_first_tensors);
    m_first_tensors = nullptr; // once
    m_first_named = {};
    if (!first.tensors.empty())
        call(first);
}

// Gives back `object` and everything made after it, if nothing can reach them any more.
inline void DcpStore::reclaim(uint32_t object)
{
    if (m_pinned > object)
        return;
    const uint64_t made = m_scratch[object].b;
    const auto first = std::lower_bound(m_touches.begin(), m_touches.end(), made,
                                        [](const Touch& t, uint64_t m) { return t.made < m; });
    if (first != m_touches.end() && first->slot < object)
        return; // an older container or object was changed since: it may hold something newer
    m_pool.resize(m_scratch[object].a);
    m_scratch.resize(object);
    while (!m_touches.empty() && m_touches.back().slot >= object)
        m_touches.pop_back();
}

namespace {

// Runs the machine over the bytes with the DcpStore, then reads the Metadata it left.
class Decoder : public PickleMachine<DcpStore> {
public:
    Decoder(PickleInput input, const std::string& path, const PickleLimits& limits, MemoUse use,
            DcpFirstTensors first_tensors)
        : PickleMachine<DcpStore>(std::move(input), path, limits), m_shown(path)
    {
        m_use = std::move(use);
        m_first_tensors = std::move(first_tensors);
    }

    [[noreturn]] void bad(const std::string& what) const
    {
        throw Error(ProblemKind::invalid_manifest, m_shown + ": unexpected DCP metadata: " + what, m_shown);
    }
    void count()
    {
        if (++m_items > kMaxDcpItems)
            bad("more than " + std::to_string(kMaxDcpItems) + " tensors, chunks and storage entries (limit)");
    }
    std::string str(uint32_t h, const std::string& what) const
    {
        std::string_view s;
        if (!string_of(h, s))
            bad(is_not(what, h, "not a str"));
        return std::string(s);
    }

    DcpMetadata decode()
    {
        const Decoded decoded = run();
        m_use = {}; // pass one's marks are done with too
        DcpMetadata out;
        out.pickle_protocol = decoded.protocol;
        const uint32_t root = decoded.root;
        const std::string_view cls = class_name_of(root);
        if (!cls.ends_with("Metadata"))
            bad("the pickled root is " + describe(root, 1) + ", not a torch.distributed.checkpoint Metadata");
        const uint32_t sdm = attribute(root, "state_dict_metadata");
        if (kind(sdm) != PickleKind::dict)
            bad("state_dict_metadata is missing or not a dict");
        // storage_data: {MetadataIndex(fqn, offset, index): _StorageInfo(relative_path, offset, length)},
        // matched to the chunks by (fqn, offsets) and to the bytes items by (fqn, no offsets); the
        // last entry of a key wins, as in the dict it was. Sorted by the key's hash (16 bytes an
        // entry) rather than hashed into nodes.
        struct Entry {
            uint64_t hash = 0;
            uint32_t index = 0; // the MetadataIndex record
            uint32_t storage = 0; // in m_storages
        };
        std::vector<Entry> entries;
        const uint32_t sd = attribute(root, "storage_data");
        if (sd != kNoPickleValue && kind(sd) == PickleKind::dict) {
            const auto kv = items(sd);
            entries.reserve(kv.size() / 2);
            for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
                count();
                const uint32_t index = resolve(kv[i]), info = resolve(kv[i + 1]);
                if (value(index).fold != Fold::index) {
                    std::string_view fqn;
                    if (!string_of(attribute(index, Name::fqn), fqn))
                        bad(is_not("a storage_data key's fqn", attribute(index, Name::fqn), "not a str"));
                    bad("storage_data['" + std::string(fqn) + "']" + why_not(index));
                }
                if (value(info).fold != Fold::storage)
                    bad("storage_data['" + std::string(text_of(value(value(index).a))) + "']" + why_not(info));
                entries.push_back({key_hash(std::hash<std::string_view>()(index_fqn(index)), index_offsets(index),
                                            has_offsets(index)),
                                   index, value(info).a});
            }
        } else if (sd != kNoPickleValue && kind(sd) != PickleKind::none) {
            bad("storage_data is " + describe(sd, 1) + ", not a dict");
        }
        std::stable_sort(entries.begin(), entries.end(),
                         [](const Entry& a, const Entry& b) { return a.hash < b.hash; });
        // The storage record of a key, or -1: the last entry written of those equal to it.
        auto find = [&](std::string_view fqn, uint64_t fqn_hash, std::span<const int64_t> offsets,
                        bool with_offsets) -> int64_t {
            const uint64_t h = key_hash(fqn_hash, offsets, with_offsets);
            auto it = std::upper_bound(entries.begin(), entries.end(), h,
                                       [](uint64_t x, const Entry& e) { return x < e.hash; });
            while (it != entries.begin() && (it - 1)->hash == h) {
                --it;
                const auto o = index_offsets(it->index);
                if (index_fqn(it->index) == fqn && has_offsets(it->index) == with_offsets &&
                    std::equal(o.begin(), o.end(), offsets.begin(), offsets.end()))
                    return it->storage;
            }
            return -1;
        };
        // Files: those of the surviving entries (the last of each key: of equal keys, which have
        // equal hashes, the last in a run of the stable sort), sorted.
        auto same_key = [&](const Entry& a, const Entry& b) {
            const auto x = index_offsets(a.index), y = index_offsets(b.index);
            return index_fqn(a.index) == index_fqn(b.index) && has_offsets(a.index) == has_offsets(b.index) &&
                std::equal(x.begin(), x.end(), y.begin(), y.end());
        };
        std::vector<uint32_t> file_handles;
        for (std::size_t i = 0; i < entries.size(); ++i) {
            bool survives = true;
            for (std::size_t j = i + 1; survives && j < entries.size() && entries[j].hash == entries[i].hash; ++j)
                survives = !same_key(entries[i], entries[j]);
            if (survives)
                file_handles.push_back(m_storages[entries[i].storage].file);
        }
        std::sort(file_handles.begin(), file_handles.end()); // most share a handle: few distinct texts
        file_handles.erase(std::unique(file_handles.begin(), file_handles.end()), file_handles.end());
        std::sort(file_handles.begin(), file_handles.end(),
                  [&](uint32_t a, uint32_t b) { return text_of(value(a)) < text_of(value(b)); });
        file_handles.erase(std::unique(file_handles.begin(), file_handles.end(),
                                       [&](uint32_t a, uint32_t b) { return text_of(value(a)) == text_of(value(b)); }),
                           file_handles.end());
        std::unordered_map<uint32_t, int32_t> file_index; // str handle -> index in out.files
        for (const uint32_t h : file_handles) {
            file_index.emplace(h, int32_t(out.files.size()));
            out.files.emplace_back(text_of(value(h)));
        }
        // A long file name is not shared: equal text may have another handle.
        auto file_of = [&](uint32_t h) -> int32_t {
            if (const auto it = file_index.find(h); it != file_index.end())
                return it->second;
            const auto it = std::lower_bound(out.files.begin(), out.files.end(), text_of(value(h)));
            return int32_t(it - out.files.begin());
        };

        const auto kv = items(sdm);
        for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
            count();
            const std::string fqn = str(kv[i], "a state_dict_metadata key");
            const uint32_t md = resolve(kv[i + 1]);
            const Fold fold_kind = value(md).fold;
            // A BytesStorageMetadata has no fields: Python 3.11+ pickles it without a BUILD.
            if (fold_kind == Fold::bytes_item || is_class(md, Name::BytesStorageMetadata)) {
                DcpBytesItem item{fqn, {}};
                if (const int64_t s = find(fqn, std::hash<std::string_view>()(fqn), {}, false); s >= 0) {
                    const StorageRecord& r = m_storages[s];
                    item.storage = {.present = true,
                                    .file = std::string(text_of(value(r.file))),
                                    .offset = r.offset,
                                    .length = r.length,
                                    .transformed = r.transformed,
                                    .transform = m_transforms[r.transform]};
                }
                out.bytes.push_back(std::move(item));
                continue;
            }
            if (fold_kind != Fold::tensor) {
                if (is_class(md, Name::TensorStorageMetadata))
                    bad("'" + fqn + "'" + why_not(md));
                bad("'" + fqn + "' is described by " + describe(md, 1) + ", not Tensor/BytesStorageMetadata");
            }
            const TensorRecord& t = m_tensors[value(md).a];
            if (out.chunks.empty()) { // all chunks of all tensors, and their numbers (no regrowth)
                std::size_t numbers = 0;
                for (const uint32_t c : m_tensor_chunks)
                    numbers += value(value(c).a).a + value(static_cast<uint32_t>(value(c).b)).a;
                out.chunks.reserve(m_tensor_chunks.size());
                out.numbers.reserve(numbers);
            }
            const uint64_t fqn_hash = std::hash<std::string_view>()(fqn);
            // (a tensor shared by many keys is copied for each: its chunks count, and so do their
            // dimensions)
            const bool added = append_tensor(out, fqn, t, [&](DcpChunk& chunk, std::span<const int64_t> offsets) {
                count();
                if (const int64_t s = find(fqn, fqn_hash, offsets, true); s >= 0) {
                    const StorageRecord& r = m_storages[s];
                    chunk.file = file_of(r.file);
                    chunk.offset = r.offset;
                    chunk.length = r.length;
                    chunk.transformed = r.transformed;
                    chunk.transform = r.transform;
                }
            });
            if (!added)
                bad("more than " + std::to_string(kMaxDcpDimensionValues) + " chunk offsets and sizes in all (limit)");
        }

        if (std::string_view v; string_of(attribute(root, "version"), v))
            out.info["version"] = std::string(v);
        const uint32_t sm = attribute(root, "storage_meta");
        for (const char* f : {"checkpoint_id", "save_id", "load_id"})
            if (const uint32_t x = attribute(sm, f); x != kNoPickleValue && kind(x) != PickleKind::none)
                out.info[std::string("storage_meta.") + f] = describe(x, 1);
        if (const uint32_t pd = attribute(root, "planner_data"); pd != kNoPickleValue && kind(pd) != PickleKind::none)
            out.info["planner_data"] = describe(pd, 1);
        describe_mcore_data(attribute(root, "mcore_data"), out);
        out.transforms = m_transforms;
        return out;
    }

private:
    // Megatron-LM's torch_dist saves set `mcore_data` on the Metadata instance ({key: {} or
    // {"nd_reformulated_orig_global_shape": (...)}}): the shapes its loader needs to undo an N-D
    // tensor flattened to 1-D. DCP ignores it; the summary says it is there and how many
    // tensors were flattened, since a reader that drops it cannot restore those shapes.
    void describe_mcore_data(uint32_t data, DcpMetadata& out) const
    {
        if (data == kNoPickleValue || kind(data) == PickleKind::none)
            return;
        if (kind(data) != PickleKind::dict) {
            out.info["mcore_data"] = "present (" + describe(data, 1) + ")";
            return;
        }
        const auto kv = items(data);
        const uint32_t reformulated = shared_text("nd_reformulated_orig_global_shape");
        std::size_t flattened = 0;
        for (std::size_t i = 1; i < kv.size(); i += 2)
            if (reformulated != kNoPickleValue && kind(kv[i]) == PickleKind::dict) {
                const auto inner = items(kv[i]);
                // One shared dict under every key must not cost the product of the two sizes.
                for (std::size_t k = 0; k < inner.size() && inner.size() <= 2 * kMaxFields; k += 2)
                    if (inner[k] == reformulated) {
                        ++flattened;
                        break;
                    }
            }
        out.info["mcore_data"] = std::to_string(kv.size() / 2) + " entries, " + std::to_string(flattened) +
            " with nd_reformulated_orig_global_shape (Megatron torch_dist)";
    }

    // Why an object is not the record it should be: its fields' fault, or none left when they
    // changed after it was built (a later SETITEMS on its state).
    std::string why_not(uint32_t object)
    {
        std::string problem = fold(object, true).problem;
        return problem.empty() ? " is " + describe(object, 1) + ", whose fields changed after it was built" : problem;
    }

    std::string_view index_fqn(uint32_t index) const { return text_of(value(value(index).a)); }
    bool has_offsets(uint32_t index) const { return static_cast<uint32_t>(value(index).b) != kNoPickleValue; }
    std::span<const int64_t> index_offsets(uint32_t index) const
    {
        if (!has_offsets(index))
            return {};
        const Value d = value(static_cast<uint32_t>(value(index).b));
        return std::span<const int64_t>(m_numbers).subspan(d.b, d.a);
    }
    static uint64_t key_hash(uint64_t fqn_hash, std::span<const int64_t> offsets, bool with_offsets)
    {
        uint64_t h = fqn_hash ^ (with_offsets ? 0x9e3779b97f4a7c15ull : 0);
        for (const int64_t d : offsets)
            h = (h ^ static_cast<uint64_t>(d)) * 0x100000001b3ull;
        return h;
    }

    std::string m_shown;
    uint64_t m_items = 0;
};

} // namespace

} // namespace shardscope::foreign::dcp

namespace shardscope {

namespace {

void check_size(std::size_t bytes, const std::string& display_path)
{
    if (bytes > kMaxDcpMetadataBytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": " + std::to_string(bytes) + " bytes exceed the " +
                        std::to_string(kMaxDcpMetadataBytes) + "-byte limit for DCP metadata",
                    display_path);
}

} // namespace

DcpMetadata decode_dcp_metadata(std::string_view bytes, const std::string& display_path, const PickleLimits& limits,
                                DcpFirstTensors first_tensors)
{
    using namespace foreign::dcp;
    check_size(bytes.size(), display_path);
    MemoUse use = scan_memo_use(PickleInput(bytes), limits);
    return Decoder(PickleInput(bytes), display_path, limits, std::move(use), std::move(first_tensors)).decode();
}

DcpMetadata decode_dcp_metadata_file(const storage::Folder& folder, const std::string& name,
                                     const std::string& display_path, DcpFirstTensors first_tensors)
{
    using namespace foreign::dcp;
    const storage::OpenedObject file = folder.open_small(name, kMaxDcpMetadataBytes, display_path);
    const PickleInput::ReadAt read = storage::read_function(*file.reader);
    // Read twice through a window (pass one, then the fold): the file's bytes are never all resident.
    MemoUse use = scan_memo_use(PickleInput(read, file.size), PickleLimits{});
    return Decoder(PickleInput(read, file.size), display_path, PickleLimits{}, std::move(use), std::move(first_tensors))
        .decode();
}

} // namespace shardscope
