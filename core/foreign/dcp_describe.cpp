// What a DCP layout's metadata alone says: whether its chunks tile their tensors, the summary
// rows, the tensor list and the ownership layout (internal/dcp_layout.h).

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/dcp_layout.h"
#include "core/util/volume.h"

#include <algorithm>
#include <filesystem>

namespace shardscope {

namespace fs = std::filesystem;
using foreign::add_row;

namespace {

// The files holding `t`'s chunks, for a layout read from their headers: "a, b and c" (the first
// three in name order, then how many more).
std::string chunk_files(const DcpMetadata& meta, const DcpTensor& t)
{
    std::vector<int32_t> files;
    for (const auto& c : meta.chunks_of(t))
        if (c.file >= 0)
            files.push_back(c.file);
    std::ranges::sort(files);
    files.erase(std::unique(files.begin(), files.end()), files.end());
    std::string out;
    const std::size_t shown = std::min<std::size_t>(files.size(), 3);
    for (std::size_t i = 0; i < shown; ++i)
        out += (i == 0 ? "" : i + 1 == shown && files.size() == shown ? " and " : ", ") + meta.files[files[i]];
    if (files.size() > shown)
        out += " and " + std::to_string(files.size() - shown) + " more files";
    return out;
}

} // namespace

void check_dcp_tiling(const DcpMetadata& meta, const DcpTensor& t, const DcpTilingSource& src,
                      std::vector<Problem>& out)
{
    // Where a chunk's sentence starts: the metadata that describes it, or (from the files' headers)
    // the file that holds it.
    auto at_chunk = [&](const DcpChunk& c, std::string message, ProblemKind kind) {
        if (src.from_headers && c.file >= 0) {
            const std::string& file = meta.files[c.file];
            out.push_back({.kind = kind,
                           .message = (fs::path(src.described) / file).string() + ": " + std::move(message),
                           .path = file,
                           .rank = dcp_rank_of(file)});
        } else {
            out.push_back({.kind = kind, .message = src.described + ": " + std::move(message), .path = src.path});
        }
    };
    uint64_t volume = 0;
    if (!checked_volume(t.size, volume)) {
        out.push_back({.kind = ProblemKind::invalid_manifest,
                       .message = src.described + ": tensor '" + t.fqn + "' has a size whose element count overflows",
                       .path = src.path});
        return;
    }
    const auto chunks = meta.chunks_of(t);
    uint64_t covered = 0;
    for (const auto& c : chunks) {
        const auto offsets = meta.offsets(c), sizes = meta.sizes(c);
        bool inside = offsets.size() == t.size.size() && sizes.size() == t.size.size();
        for (std::size_t d = 0; inside && d < t.size.size(); ++d)
            inside = offsets[d] <= t.size[d] && sizes[d] <= t.size[d] - offsets[d];
        uint64_t v = 0;
        if (!inside || !checked_volume(sizes, v)) {
            at_chunk(c,
                     "tensor '" + t.fqn + "' " + join_dims(t.size) + " has a chunk at " + join_dims(offsets) +
                         " of size " + join_dims(sizes) + " outside its bounds",
                     ProblemKind::layout_overlap);
            return;
        }
        covered += v; // bounded by chunks x volume, each <= volume: cannot overflow for sane counts
    }
    constexpr std::size_t kMaxPairwise = 2048;
    if (chunks.size() <= kMaxPairwise)
        for (std::size_t a = 0; a < chunks.size(); ++a)
            for (std::size_t b = a + 1; b < chunks.size(); ++b) {
                const auto xo = meta.offsets(chunks[a]), xs = meta.sizes(chunks[a]);
                const auto yo = meta.offsets(chunks[b]), ys = meta.sizes(chunks[b]);
                bool overlap = true;
                for (std::size_t d = 0; overlap && d < t.size.size(); ++d)
                    overlap = xs[d] > 0 && ys[d] > 0 && xo[d] < yo[d] + ys[d] && yo[d] < xo[d] + xs[d];
                if (!overlap)
                    continue;
                if (src.from_headers && chunks[a].file >= 0 && chunks[b].file >= 0)
                    at_chunk(chunks[b],
                             "tensor '" + t.fqn + "': its chunk at " + join_dims(yo) + " overlaps the chunk at " +
                                 join_dims(xo) +
                                 (chunks[a].file == chunks[b].file ? std::string(" in the same file")
                                                                   : " in " + meta.files[chunks[a].file]),
                             ProblemKind::layout_overlap);
                else
                    at_chunk(chunks[b],
                             "tensor '" + t.fqn + "': chunks at " + join_dims(xo) + " and " + join_dims(yo) +
                                 " overlap",
                             ProblemKind::layout_overlap);
                return;
            }
    const std::string files = src.from_headers ? chunk_files(meta, t) : std::string();
    const std::string in_files = files.empty() ? files : " in " + files;
    if (covered < volume && !src.files_left_out)
        out.push_back({.kind = ProblemKind::layout_gap,
                       .message = src.described + ": tensor '" + t.fqn + "' " + join_dims(t.size) + " has " +
                           std::to_string(volume) + " elements but its chunks" + in_files + " cover only " +
                           std::to_string(covered),
                       .path = src.path});
    else if (covered > volume)
        out.push_back({.kind = ProblemKind::layout_overlap,
                       .message = src.described + ": tensor '" + t.fqn + "' has " + std::to_string(volume) +
                           " elements but its chunks" + in_files + " cover " + std::to_string(covered),
                       .path = src.path});
}

void list_dcp_tensors(const DcpMetadata& meta, ForeignSummary& summary)
{
    summary.tensors_total = meta.tensors.size() + meta.bytes.size();
    summary.tensors.reserve(std::min<std::size_t>(summary.tensors_total, foreign::kMaxListedTensors), 0,
                            meta.numbers.size() + 4 * meta.tensors.size(), meta.chunks.size());
    for (const auto& t : meta.tensors) {
        if (summary.tensors.size() >= foreign::kMaxListedTensors)
            break;
        uint64_t volume = 0;
        checked_volume(t.size, volume);
        const auto chunks = meta.chunks_of(t);
        const std::string detail = std::to_string(chunks.size()) + (chunks.size() == 1 ? " chunk" : " chunks");
        ForeignTensorFields row{.name = t.fqn,
                                .dtype = t.dtype,
                                .shape = t.size,
                                .bytes = volume * torch_dtype_size(t.dtype),
                                .detail = detail};
        if (!chunks.empty() && chunks[0].file >= 0) {
            row.file = meta.file(chunks[0]);
            row.offset = chunks[0].offset;
        }
        for (const auto& c : chunks)
            summary.tensors.add_chunk({.offsets = meta.offsets(c),
                                       .sizes = meta.sizes(c),
                                       .file = meta.file(c),
                                       .offset = c.offset,
                                       .length = c.length});
        summary.tensors.add(row, chunks.size());
    }
    for (const auto& b : meta.bytes) {
        if (summary.tensors.size() >= foreign::kMaxListedTensors)
            break;
        summary.tensors.add({.name = b.fqn,
                             .dtype = "bytes",
                             .file = b.storage.file,
                             .offset = b.storage.offset,
                             .bytes = b.storage.length,
                             .detail = "pickled object"});
    }
}

void describe_dcp_metadata(const DcpMetadata& meta, uint64_t chunks, std::size_t files, std::size_t ranks,
                           uint64_t data_bytes, const std::vector<std::string>& unreferenced, ForeignSummary& summary)
{
    if (meta.pickle_protocol > 0) // 0: the layout was assembled from headers, not unpickled
        add_row(summary, "pickle protocol", std::to_string(meta.pickle_protocol));
    add_row(summary, "tensors", std::to_string(meta.tensors.size()));
    add_row(summary, "non-tensor items", std::to_string(meta.bytes.size()));
    add_row(summary, "chunks", std::to_string(chunks));
    add_row(summary, "files", std::to_string(files));
    add_row(summary, "ranks", std::to_string(ranks));
    summary.world_size = int64_t(ranks);
    add_row(summary, "stored bytes", human_bytes(data_bytes) + " (" + std::to_string(data_bytes) + ")");
    for (const auto& [key, value] : meta.info)
        add_row(summary, key, value);
    if (!unreferenced.empty()) {
        std::string list;
        for (const auto& n : unreferenced)
            list += (list.empty() ? "" : ", ") + n;
        add_row(summary, "files not referenced by .metadata", list);
    }
    list_dcp_tensors(meta, summary);
}

ForeignLayout dcp_ownership_layout(const DcpMetadata& meta)
{
    ForeignLayout layout;
    std::vector<int> file_ranks;
    for (const auto& f : meta.files)
        file_ranks.push_back(dcp_rank_of(f));
    for (std::size_t ti = 0; ti < meta.tensors.size(); ++ti) {
        const DcpTensor& t = meta.tensors[ti];
        std::vector<const DcpChunk*> order;
        for (const auto& c : meta.chunks_of(t))
            order.push_back(&c);
        std::sort(order.begin(), order.end(), [&](const DcpChunk* x, const DcpChunk* y) {
            const auto a = meta.offsets(*x), b = meta.offsets(*y);
            return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
        });
        const uint64_t start = layout.total;
        for (const DcpChunk* c : order) {
            uint64_t volume = 0;
            if (!checked_volume(meta.sizes(*c), volume) || __builtin_add_overflow(layout.total, volume, &volume))
                break; // check_tiling reports the overflow
            volume -= layout.total;
            const int rank = c->file >= 0 ? file_ranks[c->file] : -1;
            if (!layout.holders.empty() && layout.holders.back().id == rank &&
                layout.holders.back().offset + layout.holders.back().numel == layout.total)
                layout.holders.back().numel += volume;
            else if (volume > 0)
                layout.holders.push_back({layout.total, volume, rank});
            layout.total += volume;
        }
        if (layout.total > start) {
            layout.tensors.push_back({start, layout.total - start, int(layout.tensor_names.size())});
            layout.tensor_names.push_back(t.fqn);
            layout.tensor_shapes.push_back(t.size);
        }
    }
    return layout;
}

} // namespace shardscope
