#include "core/inspect/internal/tensor_reader.h"

#include "core/foreign/dcp_transform.h"
#include "core/foreign/io/zip_reader.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace shardscope::inspect {

namespace fs = std::filesystem;

namespace {

std::string part_label(const TensorPart& part)
{
    return (part.rank >= 0 ? "rank " + std::to_string(part.rank) + ": " : std::string()) + part.file;
}

// Why a part cannot be read as laid out, or "" when it can.
std::string invalid_part(const TensorPart& p, const std::vector<uint64_t>& shape, bool boxes, uint64_t numel)
{
    if (boxes) {
        if (p.box_offsets.size() != shape.size() || p.box_sizes.size() != shape.size())
            return "its chunk has " + std::to_string(p.box_offsets.size()) + " dimensions, the tensor " +
                std::to_string(shape.size());
        uint64_t cells = 0;
        for (std::size_t d = 0; d < shape.size(); ++d) {
            uint64_t end = 0;
            if (__builtin_add_overflow(p.box_offsets[d], p.box_sizes[d], &end) || end > shape[d])
                return "its chunk reaches outside the tensor in dimension " + std::to_string(d);
        }
        if (!checked_volume(p.box_sizes, cells) || cells != p.numel)
            return "its chunk's sizes do not multiply to its element count";
        return "";
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(p.first_element, p.numel, &end) || end > numel)
        return "it holds elements past the tensor's " + std::to_string(numel);
    if (!p.view_shape.empty() || !p.view_strides.empty()) {
        uint64_t cells = 0;
        if (p.view_shape.size() != p.view_strides.size() || !checked_volume(p.view_shape, cells) || cells != p.numel)
            return "its strides do not match its shape";
        // No index computed from these strides wraps; where the last one lands, the layout has
        // checked against the view's storage, and the reads check against the file.
        if (!stored_span(p))
            return "its strides reach outside its storage";
    }
    return "";
}

} // namespace

TensorReader::TensorReader(const storage::Folder& folder, const TensorContent& tensor)
    : m_folder(folder), m_dir(folder.path), m_tensor(tensor), m_size(element_size(tensor.type))
{
    if (!checked_volume(tensor.shape, m_numel)) {
        m_invalid = "its shape's element count overflows";
        return;
    }
    m_boxes = std::any_of(tensor.parts.begin(), tensor.parts.end(),
                          [](const TensorPart& p) { return !p.box_offsets.empty(); });
    for (const TensorPart& p : tensor.parts)
        if (std::string why = invalid_part(p, tensor.shape, m_boxes, m_numel); !why.empty()) {
            m_invalid = part_label(p) + ": " + why;
            return;
        }
    if (!m_boxes &&
        !std::is_sorted(tensor.parts.begin(), tensor.parts.end(),
                        [](const TensorPart& a, const TensorPart& b) { return a.first_element < b.first_element; }))
        m_invalid = "its parts are not in element order";
}

Problem TensorReader::problem(ProblemKind kind, const TensorPart* part, const std::string& what) const
{
    const std::string name =
        "'" + printable(m_tensor.name) + "'" + (m_tensor.state.empty() ? "" : " (" + m_tensor.state + ")");
    if (!part)
        return {.kind = kind, .message = (m_dir.string()) + ": tensor " + name + ": " + what};
    return {.kind = kind,
            .message = (part->rank >= 0 ? "rank " + std::to_string(part->rank) + ": " : std::string()) +
                (m_dir / part->file).string() + ": tensor " + name + ": " + what,
            .path = part->file,
            .rank = part->rank};
}

std::optional<Problem> TensorReader::open_part(const TensorPart& part)
{
    auto [it, inserted] = m_files.try_emplace(part.file);
    if (inserted) {
        if (m_files.size() > 16) { // a tensor over many ranks: a few descriptors per reader, not all
            auto evict = m_files.begin(); // two readers per thread, all cores: stay far below 1024
            if (evict == it)
                ++evict;
            m_files.erase(evict);
        }
        it->second = m_folder.open(part.file);
    }
    if (it->second.status != fsutil::OpenStatus::ok)
        return problem(it->second.status == fsutil::OpenStatus::missing ? ProblemKind::missing_file
                                                                        : ProblemKind::unreadable,
                       &part, it->second.reason);
    return std::nullopt;
}

std::vector<std::byte> inflate_dcp_part(const storage::Reader& file, const TensorPart& part, std::size_t element_size,
                                        const std::string& shown)
{
    uint64_t bytes = 0, end = 0;
    const bool overflow = __builtin_mul_overflow(part.numel, element_size, &bytes) ||
        __builtin_add_overflow(bytes, part.byte_offset, &end);
    std::vector<std::byte> item = inflate_dcp_zstd(storage::read_function(file), part.zstd_offset, part.zstd_length,
                                                   dcp_inflated_limit(overflow ? 0 : bytes), shown);
    if (overflow || end > item.size())
        throw Error(ProblemKind::size_mismatch,
                    shown + ": its decompressed " + std::to_string(item.size()) + " bytes do not hold the chunk's " +
                        std::to_string(bytes) + " at byte " + std::to_string(part.byte_offset),
                    part.file, part.rank);
    return item;
}

// `count` elements stored consecutively from the part's `stored_element`-th.
std::optional<Problem> TensorReader::pread_part(const TensorPart& part, uint64_t stored_element, uint64_t count,
                                                std::byte* out)
{
    if (auto failed = open_part(part))
        return failed;
    const storage::OpenedObject& file = m_files.at(part.file);
    if (part.zstd_length) { // one compressed part at a time in memory: reads go forward
        if (m_inflated_part != &part) {
            m_inflated_part = nullptr;
            try {
                m_inflated = inflate_dcp_part(*file.reader, part, m_size,
                                              problem(ProblemKind::invalid_archive, &part, "its chunk").message);
            } catch (const Error& e) {
                rethrow_remote(e);
                return Problem{.kind = e.kind(), .message = e.what(), .path = part.file, .rank = part.rank};
            }
            m_inflated_part = &part;
        }
        uint64_t at = 0, bytes = 0, end = 0;
        if (__builtin_mul_overflow(stored_element, m_size, &at) || __builtin_add_overflow(at, part.byte_offset, &at) ||
            __builtin_mul_overflow(count, m_size, &bytes) || __builtin_add_overflow(at, bytes, &end) ||
            end > m_inflated.size())
            return problem(ProblemKind::range_outside_file, &part, "its elements run past its decompressed item");
        std::memcpy(out, m_inflated.data() + at, bytes);
        return std::nullopt;
    }
    uint64_t at = 0, bytes = 0, end = 0;
    if (__builtin_mul_overflow(stored_element, m_size, &at) || __builtin_add_overflow(at, part.byte_offset, &at) ||
        __builtin_mul_overflow(count, m_size, &bytes) || __builtin_add_overflow(at, bytes, &end) || end > file.size)
        return problem(ProblemKind::range_outside_file, &part,
                       "its elements run past the end of the " + std::to_string(file.size) + "-byte file");
    if (!file.read(out, bytes, at))
        return problem(ProblemKind::unreadable, &part,
                       errno ? std::string("cannot read: ") + std::strerror(errno)
                             : std::string("the file shrank while it was being read"));
    return std::nullopt;
}

std::optional<Problem> TensorReader::read(uint64_t first, uint64_t count, std::byte* out)
{
    if (m_invalid)
        return problem(ProblemKind::invalid_manifest, nullptr, *m_invalid);
    uint64_t end = 0;
    if (__builtin_add_overflow(first, count, &end) || end > m_numel)
        return problem(ProblemKind::invalid_argument, nullptr, "elements past its end were asked for");
    while (count > 0) {
        Run run;
        if (auto failed = locate(first, count, run))
            return failed;
        auto failed = run.part->view_shape.empty() ? pread_part(*run.part, run.stored, run.count, out)
                                                   : read_view(*run.part, run.stored, run.count, out);
        if (failed)
            return failed;
        first += run.count;
        count -= run.count;
        out += run.count * m_size;
    }
    return std::nullopt;
}

std::optional<TensorReader::LocalRun> TensorReader::local_run(uint64_t first, uint64_t count)
{
    uint64_t end = 0;
    Run run;
    if (m_invalid || __builtin_add_overflow(first, count, &end) || end > m_numel || count == 0 ||
        locate(first, count, run) || !run.part->view_shape.empty() || run.part->zstd_length || open_part(*run.part))
        return std::nullopt;
    const storage::OpenedObject& file = m_files.at(run.part->file);
    uint64_t at = 0, bytes = 0, stop = 0;
    if (file.fd() < 0 || __builtin_mul_overflow(run.stored, m_size, &at) ||
        __builtin_add_overflow(at, run.part->byte_offset, &at) || __builtin_mul_overflow(run.count, m_size, &bytes) ||
        __builtin_add_overflow(at, bytes, &stop) || stop > file.size)
        return std::nullopt; // read() says what is wrong
    return LocalRun{.fd = file.fd(), .offset = at, .count = run.count};
}

std::optional<Problem> TensorReader::locate(uint64_t first, uint64_t count, Run& run)
{
    return m_boxes ? locate_in_boxes(first, count, run) : locate_flat(first, count, run);
}

std::optional<Problem> TensorReader::locate_flat(uint64_t first, uint64_t count, Run& run)
{
    const auto& parts = m_tensor.parts;
    // The part holding `first`: usually the one the last read ended in, or the next.
    if (m_hint >= parts.size() || parts[m_hint].first_element > first)
        m_hint = 0;
    while (m_hint < parts.size() && parts[m_hint].first_element + parts[m_hint].numel <= first)
        ++m_hint;
    if (m_hint == parts.size() || parts[m_hint].first_element > first)
        return problem(ProblemKind::missing_tensor, nullptr,
                       "element " + std::to_string(first) +
                           " is in no part that could be read (a rank's slice or file is missing)");
    const TensorPart& part = parts[m_hint];
    const uint64_t local = first - part.first_element;
    run = {.part = &part, .stored = local, .count = std::min(count, part.numel - local)};
    return std::nullopt;
}

// A DCP tensor: the elements in row-major order, in the chunk (box) that holds `first`. Within a
// box the run continues across rows as long as the box spans whole rows.
std::optional<Problem> TensorReader::locate_in_boxes(uint64_t first, uint64_t count, Run& run)
{
    const auto& shape = m_tensor.shape;
    const std::size_t dims = shape.size();
    std::vector<uint64_t> index(dims);
    uint64_t rest = first;
    for (std::size_t d = dims; d-- > 0;) {
        index[d] = rest % shape[d];
        rest /= shape[d];
    }
    auto holds = [&](const TensorPart& p) {
        for (std::size_t d = 0; d < dims; ++d)
            if (index[d] < p.box_offsets[d] || index[d] >= p.box_offsets[d] + p.box_sizes[d])
                return false;
        return true;
    };
    // Runs go forward: the chunk of the last run, or the next one, almost always holds this one.
    const std::size_t count_parts = m_tensor.parts.size();
    std::size_t found = count_parts;
    for (const std::size_t guess : {m_hint, m_hint + 1})
        if (found == count_parts && guess < count_parts && holds(m_tensor.parts[guess]))
            found = guess;
    for (std::size_t p = 0; found == count_parts && p < count_parts; ++p)
        if (holds(m_tensor.parts[p]))
            found = p;
    if (found == m_tensor.parts.size())
        return problem(ProblemKind::missing_tensor, nullptr,
                       "element " + std::to_string(first) + " is in no chunk that could be read");
    m_hint = found;
    const TensorPart& part = m_tensor.parts[found];
    // k: the outermost dimension from which the box spans the tensor's whole extent inward.
    std::size_t k = dims == 0 ? 0 : dims - 1;
    while (k > 0 && part.box_sizes[k] == shape[k])
        --k;
    uint64_t inner = 1; // elements in one step of dimension k
    for (std::size_t d = k + 1; d < dims; ++d)
        inner *= shape[d];
    uint64_t length = dims == 0 ? 1 : (part.box_offsets[k] + part.box_sizes[k] - index[k]) * inner;
    uint64_t into = 0; // elements of the inner block already behind `first`
    for (std::size_t d = k + 1; d < dims; ++d)
        into = into * shape[d] + index[d];
    length -= into;
    uint64_t stored = 0; // row-major position inside the box
    for (std::size_t d = 0; d < dims; ++d)
        stored = stored * part.box_sizes[d] + (index[d] - part.box_offsets[d]);
    run = {.part = &part, .stored = stored, .count = std::min(count, length)};
    return std::nullopt;
}

std::optional<Problem> TensorReader::read_view(const TensorPart& part, uint64_t first, uint64_t count, std::byte* out)
{
    std::optional<Problem> failed;
    gather_view(part, m_size, first, count, out, [&](uint64_t stored, uint64_t elements, std::byte* into) {
        failed = pread_part(part, stored, elements, into);
        return !failed;
    });
    return failed;
}

std::optional<uint64_t> stored_span(const TensorPart& part)
{
    if (part.view_shape.empty())
        return part.numel;
    if (part.view_strides.size() != part.view_shape.size())
        return std::nullopt;
    if (part.numel == 0)
        return 0;
    uint64_t last = 0;
    for (std::size_t d = 0; d < part.view_shape.size(); ++d) {
        uint64_t step = 0;
        if (part.view_strides[d] < 0 || part.view_shape[d] == 0 ||
            __builtin_mul_overflow(part.view_shape[d] - 1, static_cast<uint64_t>(part.view_strides[d]), &step) ||
            __builtin_add_overflow(last, step, &last))
            return std::nullopt;
    }
    return last + 1;
}

bool permutes_dense_storage(const std::vector<uint64_t>& shape, const std::vector<int64_t>& strides)
{
    if (strides.size() != shape.size())
        return false;
    std::vector<std::pair<int64_t, uint64_t>> dims; // (stride, size) of the dimensions that matter
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (shape[d] > 1)
            dims.push_back({strides[d], shape[d]});
    std::sort(dims.begin(), dims.end());
    int64_t expected = 1;
    for (const auto& [stride, size] : dims) {
        if (stride != expected)
            return false;
        if (__builtin_mul_overflow(expected, static_cast<int64_t>(size), &expected))
            return false;
    }
    return true;
}

// A transpose's row is a column of its storage: runs of a few elements each, never the storage.
// A slice with a step leaves gaps and an expanded tensor repeats places: one read covers places a
// few bytes apart, up to kRunBytes, since bytes read past are cheaper than a read each.
bool gather_view(const TensorPart& part, std::size_t element_size, uint64_t first, uint64_t count, std::byte* out,
                 const std::function<bool(uint64_t stored, uint64_t elements, std::byte* out)>& read)
{
    constexpr uint64_t kGapBytes = 256, kRunBytes = 1 << 20;
    const std::size_t dims = part.view_shape.size();
    std::vector<uint64_t> index(dims);
    uint64_t rest = first;
    for (std::size_t d = dims; d-- > 0;) {
        index[d] = rest % part.view_shape[d];
        rest /= part.view_shape[d];
    }
    std::vector<std::pair<uint64_t, uint64_t>> wanted(count); // (storage element, output element)
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t at = 0;
        for (std::size_t d = 0; d < dims; ++d)
            at += index[d] * static_cast<uint64_t>(part.view_strides[d]);
        wanted[i] = {at, i};
        for (std::size_t d = dims; d-- > 0;) { // next index, row-major
            if (++index[d] < part.view_shape[d])
                break;
            index[d] = 0;
        }
    }
    std::sort(wanted.begin(), wanted.end());
    std::vector<std::byte> run_bytes;
    for (std::size_t i = 0; i < wanted.size();) {
        const uint64_t from = wanted[i].first;
        std::size_t j = i + 1;
        while (j < wanted.size() && (wanted[j].first - wanted[j - 1].first) * element_size <= kGapBytes &&
               (wanted[j].first - from + 1) * element_size <= kRunBytes)
            ++j;
        const uint64_t elements = wanted[j - 1].first - from + 1;
        run_bytes.resize(elements * element_size);
        if (!read(from, elements, run_bytes.data()))
            return false;
        for (std::size_t k = i; k < j; ++k)
            std::memcpy(out + wanted[k].second * element_size,
                        run_bytes.data() + (wanted[k].first - from) * element_size, element_size);
        i = j;
    }
    return true;
}

} // namespace shardscope::inspect
