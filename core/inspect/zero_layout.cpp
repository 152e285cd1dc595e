// DeepSpeed ZeRO's model put back together as zero_to_fp32 does it, without reading a value: each
// parameter becomes parts pointing into the ranks' flat fp32 partitions (internal/layout.h).
//
// The rules (DeepSpeed's zero_to_fp32): the optimizer files' optimizer_state_dict.zero_stage and
// partition_count; param_shapes (one name -> shape list per param group) from the model file,
// mp_rank_00_model_states.pt (stages 1, 2) or rank 0's zero_pp_rank_0_mp_rank_00_model_states.pt
// (stage 3).
// - Stages 1 and 2: group g's partitions (`single_partition_of_fp32_groups.g` of every rank, in
//   rank order, saved without their padding) laid end to end are the group's parameters, flattened
//   in param_shapes order; the elements left over are the alignment padding, so the count used and
//   the count held agree once both are rounded up to a multiple of 2 x world size.
// - Stage 3: every parameter of n elements is split into world size pieces of ceil(n / world)
//   (the last padded); rank r's flat groups (`fp32_flat_groups.g`, end to end) hold its piece of
//   each parameter in param_shapes order, and nothing else.
// Adam's moments are laid out as the fp32 partitions they belong to, so each parameter gets its
// exp_avg and exp_avg_sq too. Buffers are the model file's `module.<name>` for each of buffer_names
// (as stored; zero_to_fp32 also casts them to float32), frozen parameters its
// `frozen_param_fragments` (stage 3: every rank's piece, end to end), and shared_params name
// aliases of parameters.

#include "core/inspect/internal/layout.h"

#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

namespace shardscope::inspect {

namespace {

// A flat vector laid end to end from runs in files: a group's partitions over the ranks, or one
// rank's groups.
struct Flat {
    std::vector<TensorPart> runs; // first_element: where each starts in the flat vector
    uint64_t size = 0;

    void add(TensorPart run)
    {
        run.first_element = size;
        size += run.numel;
        runs.push_back(std::move(run));
    }

    // The parts holding [begin, begin + count) of the flat vector, numbered from `first` in the
    // tensor they go into.
    void take(uint64_t begin, uint64_t count, uint64_t first, uint64_t element, std::vector<TensorPart>& out) const
    {
        const uint64_t end = begin + count;
        for (const TensorPart& run : runs) {
            const uint64_t lo = std::max(begin, run.first_element), hi = std::min(end, run.first_element + run.numel);
            if (lo >= hi)
                continue;
            TensorPart part = run;
            part.byte_offset += (lo - run.first_element) * element;
            part.numel = hi - lo;
            part.first_element = first + (lo - begin);
            out.push_back(std::move(part));
        }
    }
};

using GroupKey = std::function<std::string(std::size_t group)>;

class ZeroAssembly {
public:
    ZeroAssembly(const std::vector<TorchArchive>& archives, const ContentOptions& options, ContentReport& report)
        : m_archives(archives), m_options(options), m_report(report), m_before(report.tensors.size())
    {}

    void run()
    {
        if (!collect() || !check())
            return;
        if (!assemble_model()) { // what was added is not the model
            m_report.tensors.resize(m_before);
            return;
        }
        assemble_moments();
        if (!keep_selected())
            m_report.tensors.resize(m_before);
    }

private:
    // The files that take part: the ranks' optimizer files and the model files, in rank order.
    // False when the folder is no ZeRO checkpoint, or one these rules do not cover.
    bool collect()
    {
        const TorchArchive* parallel = nullptr;
        for (const TorchArchive& a : m_archives) {
            if (a.zero.zero_stage > 0)
                m_optim.push_back(&a);
            if (a.zero.model_file)
                m_models.push_back(&a);
            if (a.file.file.starts_with("layer_") || tensor_parallel_rank(a.file.file) > 0)
                parallel = &a;
        }
        if (m_optim.empty() || m_models.empty())
            return false; // no ZeRO checkpoint, or nothing names the parameters
        if (parallel) {
            unsupported(*parallel,
                        "it has model- or pipeline-parallel files (" + printable(parallel->file.file) +
                            "), and zero_to_fp32's rules put together one model-parallel rank's model only "
                            "(DeepSpeed's ds_to_universal.py merges them into a universal checkpoint, which "
                            "ShardScope reads)");
            return false;
        }
        const auto by_rank = [](const TorchArchive* a, const TorchArchive* b) { return a->file.rank < b->file.rank; };
        std::stable_sort(m_optim.begin(), m_optim.end(), by_rank);
        std::stable_sort(m_models.begin(), m_models.end(), by_rank);
        m_world = m_optim.size();
        m_stage = m_optim.front()->zero.zero_stage;
        // The model file zero_to_fp32 reads: mp_rank_00_model_states.pt, or at stage 3 rank 0's.
        m_model = m_models.front();
        for (const TorchArchive* m : m_models)
            if (m_stage <= 2 && m->file.file.find("zero_pp_rank_") == std::string::npos)
                m_model = m;
        return true;
    }

    // The ranks and the fields agree before anything is laid out.
    bool check()
    {
        for (std::size_t r = 0; r < m_optim.size(); ++r) {
            if (m_optim[r]->file.rank != static_cast<int>(r))
                return inconsistent(ProblemKind::missing_shard, *m_optim[r],
                                    "comes after " + std::to_string(r) +
                                        " optimizer files in rank order: the optimizer file of rank " +
                                        std::to_string(r) + " is missing or unreadable");
            if (m_optim[r]->zero.zero_stage != m_stage)
                return inconsistent(ProblemKind::size_mismatch, *m_optim[r],
                                    "says ZeRO stage " + std::to_string(m_optim[r]->zero.zero_stage) + ", rank 0's " +
                                        std::to_string(m_stage));
        }
        if (m_stage > 3) {
            unsupported(*m_optim.front(),
                        "its optimizer files say ZeRO stage " + std::to_string(m_stage) +
                            ", which has no known layout");
            return false;
        }
        if (const int64_t count = m_optim.front()->zero.partition_count;
            count > 0 && static_cast<uint64_t>(count) != m_world)
            return inconsistent(ProblemKind::missing_shard, *m_optim.front(),
                                "says the optimizer state is split over " + std::to_string(count) + " ranks, but " +
                                    std::to_string(m_world) + " optimizer files are here");
        if (m_model->zero.truncated)
            return inconsistent(ProblemKind::invalid_archive, *m_model,
                                "lists more parameter names and dimensions than ShardScope reads");
        if (m_stage == 3 && !m_model->zero.frozen_param_shapes.empty()) { // every rank holds a piece of them
            std::size_t r = 0;
            for (const TorchArchive* m : m_models)
                if (m->file.file.find("zero_pp_rank_") != std::string::npos) {
                    if (m->file.rank != static_cast<int>(r))
                        break;
                    m_rank_models.push_back(m);
                    ++r;
                }
            if (m_rank_models.size() != m_world)
                return inconsistent(ProblemKind::missing_shard, *m_model,
                                    "lists frozen parameters, of which every rank's model file holds a piece, but "
                                    "the model file of rank " +
                                        std::to_string(m_rank_models.size()) + " is missing or unreadable");
        }
        std::set<std::string> names;
        for (const auto& group : m_model->zero.param_shapes)
            for (const auto& [name, shape] : group)
                if (!names.insert(name).second)
                    return inconsistent(ProblemKind::invalid_archive, *m_model,
                                        "lists parameter '" + printable(name) + "' twice");
        for (const auto& [name, shape] : m_model->zero.frozen_param_shapes)
            if (!names.insert(name).second)
                return inconsistent(ProblemKind::invalid_archive, *m_model,
                                    "lists parameter '" + printable(name) + "' twice");
        return true;
    }

    bool assemble_model()
    {
        std::set<std::string> names;
        for (const std::string& name : m_model->zero.buffer_names) // not every buffer is saved (non-persistent)
            if (const auto it = m_model->tensors.find("module." + name);
                it != m_model->tensors.end() && names.insert(name).second)
                add(name, it->second.type, it->second.shape, {it->second.part});
        const bool ok = add_frozen() &&
            (m_stage == 3 ? add_stage3([](std::size_t g) {
                            return "optimizer_state_dict.fp32_flat_groups." + std::to_string(g);
                        })
                          : add_stage12([](std::size_t g) {
                                return "optimizer_state_dict.single_partition_of_fp32_groups." + std::to_string(g);
                            }));
        if (!ok)
            return false;
        std::map<std::string, std::size_t> assembled;
        for (std::size_t i = m_before; i < m_report.tensors.size(); ++i)
            assembled[m_report.tensors[i].name] = i;
        for (const auto& [alias, source] : m_model->zero.shared_params)
            if (const auto it = assembled.find(source); it != assembled.end() && !assembled.contains(alias)) {
                const TensorContent s = m_report.tensors[it->second]; // a copy: add() may move the vector
                assembled[alias] = m_report.tensors.size();
                add(alias, s.type, s.shape, s.parts);
            }
        return true;
    }

    // Adam's moments of each trained parameter, laid out as its fp32 master (state exp_avg and
    // exp_avg_sq, under the parameter's name): the torch optimizer's state of each group's flat
    // partition, optimizer_state_dict.base_optimizer_state.state.g (stages 1, 2; without `state.`
    // when saved elastic) or optimizer_state_dict.optimizer_state_dict.state.g (stage 3). Both or
    // neither: another optimizer's state, or moments that do not fit, stay as the files hold them.
    void assemble_moments()
    {
        const std::vector<std::string> roots = m_stage == 3
            ? std::vector<std::string>{"optimizer_state_dict.optimizer_state_dict.state."}
            : std::vector<std::string>{"optimizer_state_dict.base_optimizer_state.state.",
                                       "optimizer_state_dict.base_optimizer_state."};
        const std::size_t before = m_report.tensors.size();
        const std::set<std::string> partitions = m_partitions;
        for (const std::string state : {"exp_avg", "exp_avg_sq"}) {
            bool ok = false;
            for (const std::string& root : roots) {
                const GroupKey key = [&](std::size_t g) { return root + std::to_string(g) + "." + state; };
                if (!m_optim.front()->tensors.contains(key(0)))
                    continue;
                m_state = state;
                ok = m_stage == 3 ? add_stage3(key) : add_stage12(key);
                m_state.clear();
                break;
            }
            if (!ok) {
                m_report.tensors.resize(before);
                m_partitions = partitions;
                return;
            }
        }
    }

    // Only what the globs select stays; the rest was laid out to find where the selected are. An
    // assembled name that is also a name in the files leaves the model not put together: two
    // tensors of one name cannot be told apart by stats, diff or convert.
    bool keep_selected()
    {
        std::set<std::string> in_files;
        for (std::size_t i = 0; i < m_before; ++i)
            in_files.insert(m_report.tensors[i].name);
        for (std::size_t i = m_before; i < m_report.tensors.size(); ++i)
            if (in_files.contains(m_report.tensors[i].name)) {
                unsupported(*m_model,
                            "parameter '" + printable(m_report.tensors[i].name) +
                                "' has the name of a tensor the files hold");
                return false;
            }
        std::size_t kept = m_before;
        for (std::size_t i = m_before; i < m_report.tensors.size(); ++i) {
            if (!selected(m_options, m_report.tensors[i].name))
                continue;
            if (kept != i)
                m_report.tensors[kept] = std::move(m_report.tensors[i]);
            ++kept;
        }
        m_report.tensors.resize(kept);
        // The flat partitions the assembled tensors are read from hold padding, which DeepSpeed
        // leaves as whatever was in memory (stage 3): their findings are the assembled tensors'.
        for (std::size_t i = 0; i < m_before; ++i)
            if (m_partitions.contains(m_report.tensors[i].name))
                m_report.tensors[i].zero_partition = true;
        return true;
    }

    void unsupported(const TorchArchive& file, const std::string& why)
    {
        m_report.zero_unassembled = why;
        m_report.warnings.push_back({.kind = ProblemKind::unreadable,
                                     .message = m_report.dir.string() + ": the ZeRO model is not put together: " + why,
                                     .path = file.file.file});
    }

    // Always false: the model (or, with m_state, this moment) cannot be put together.
    bool inconsistent(ProblemKind kind, const TorchArchive& file, const std::string& what)
    {
        const std::string shown = (file.file.rank >= 0 ? "rank " + std::to_string(file.file.rank) + ": " : "") +
            (m_report.dir / file.file.file).string();
        if (!m_state.empty()) { // the model stands; the moments stay as the files hold them
            m_report.warnings.push_back(
                {.kind = ProblemKind::unreadable,
                 .message = shown + " " + what + ": the parameters' " + m_state + " is not put together",
                 .path = file.file.file,
                 .rank = file.file.rank});
            return false;
        }
        m_report.zero_unassembled = shown + " " + what;
        m_report.problems.push_back({.kind = kind,
                                     .message = shown + " " + what + ": the ZeRO model cannot be put together",
                                     .path = file.file.file,
                                     .rank = file.file.rank});
        return false;
    }

    void add(const std::string& name, ElementType type, std::vector<uint64_t> shape, std::vector<TensorPart> parts)
    {
        m_report.tensors.push_back({.name = name,
                                    .state = m_state,
                                    .type = type,
                                    .shape = std::move(shape),
                                    .parts = std::move(parts),
                                    .assembled = true});
    }

    // The flat tensor `key` of every file in `files` (rank order) end to end; false (and a
    // problem) when one lacks it or holds it as another type than `type` (set by the first).
    bool flat_of(const std::vector<const TorchArchive*>& files, const std::string& key, Flat& flat,
                 std::optional<ElementType>& type)
    {
        for (const TorchArchive* f : files) {
            const auto it = f->tensors.find(key);
            if (it == f->tensors.end())
                return inconsistent(ProblemKind::missing_tensor, *f, "holds no tensor '" + printable(key) + "'");
            if (!it->second.part.view_shape.empty())
                return inconsistent(ProblemKind::invalid_archive, *f,
                                    "holds '" + printable(key) + "' as a strided view, not a flat partition");
            if (type && it->second.type != *type)
                return inconsistent(ProblemKind::invalid_archive, *f,
                                    "holds '" + printable(key) + "' as " + std::string(to_string(it->second.type)) +
                                        ", the other ranks' partitions as " + std::string(to_string(*type)));
            type = it->second.type;
            flat.add(it->second.part);
            m_partitions.insert(key);
        }
        return true;
    }

    // How many groups rank 0's file holds: key(0), key(1), ...
    static std::size_t groups(const TorchArchive& file, const GroupKey& key)
    {
        std::size_t g = 0;
        while (file.tensors.contains(key(g)))
            ++g;
        return g;
    }

    bool volume_of(const std::vector<uint64_t>& shape, const std::string& name, uint64_t& n)
    {
        if (checked_volume(shape, n) && n <= (uint64_t(1) << 58))
            return true;
        return inconsistent(ProblemKind::invalid_archive, *m_model,
                            "gives parameter '" + printable(name) + "' a shape whose element count overflows");
    }

    // The flat fp32 partitions (or, with m_state, those moments) of each group: `key`.
    bool add_stage12(const GroupKey& key)
    {
        const auto& shapes = m_model->zero.param_shapes;
        if (const std::size_t held = groups(*m_optim.front(), key); held != shapes.size())
            return inconsistent(ProblemKind::size_mismatch, *m_optim.front(),
                                "holds " + std::to_string(held) + " flat groups ('" + printable(key(0)) +
                                    "', ...), but " + printable(m_model->file.file) + " lists " +
                                    std::to_string(shapes.size()) + " parameter groups");
        const uint64_t align = 2 * m_world;
        const auto aligned = [&](uint64_t x) { return (x + align - 1) / align * align; };
        std::optional<ElementType> type;
        for (std::size_t g = 0; g < shapes.size(); ++g) {
            Flat flat;
            if (!flat_of(m_optim, key(g), flat, type))
                return false;
            const uint64_t element = element_size(*type);
            uint64_t offset = 0;
            for (const auto& [name, shape] : shapes[g]) {
                uint64_t n = 0;
                if (!volume_of(shape, name, n))
                    return false;
                if (n > flat.size - offset)
                    return inconsistent(ProblemKind::size_mismatch, *m_optim.back(),
                                        "ends flat group '" + printable(key(g)) + "' (" + std::to_string(flat.size) +
                                            " elements over " + std::to_string(m_world) + " ranks) before parameter '" +
                                            printable(name) + "' of " + printable(m_model->file.file));
                std::vector<TensorPart> parts;
                flat.take(offset, n, 0, element, parts);
                add(name, *type, shape, std::move(parts));
                offset += n;
            }
            // What is left is the padding: less than the alignment, whether a rank saved its share
            // of it (the moments, the BF16 optimizer's partitions) or not.
            if (aligned(offset) != aligned(flat.size))
                return inconsistent(ProblemKind::size_mismatch, *m_optim.back(),
                                    "ends flat group '" + printable(key(g)) + "', which holds " +
                                        std::to_string(flat.size) + " elements over " + std::to_string(m_world) +
                                        " ranks, but the parameters param_shapes lists in " +
                                        printable(m_model->file.file) + " take " + std::to_string(offset) +
                                        " (more than alignment to " + std::to_string(align) + " explains)");
        }
        return true;
    }

    bool add_stage3(const GroupKey& key)
    {
        const std::size_t group_count = groups(*m_optim.front(), key);
        if (group_count == 0)
            return inconsistent(ProblemKind::missing_tensor, *m_optim.front(),
                                "holds no '" + printable(key(0)) + "' tensor");
        std::vector<Flat> ranks(m_optim.size());
        std::optional<ElementType> type;
        for (std::size_t r = 0; r < m_optim.size(); ++r)
            for (std::size_t g = 0; g < group_count; ++g)
                if (!flat_of({m_optim[r]}, key(g), ranks[r], type))
                    return false;
        for (std::size_t r = 1; r < ranks.size(); ++r)
            if (ranks[r].size != ranks[0].size)
                return inconsistent(ProblemKind::size_mismatch, *m_optim[r],
                                    "holds " + std::to_string(ranks[r].size) + " elements of '" + printable(key(0)) +
                                        "', ..., rank 0 " + std::to_string(ranks[0].size) +
                                        " (every rank holds an equal piece of each parameter)");
        const uint64_t element = element_size(*type);
        uint64_t offset = 0;
        for (const auto& group : m_model->zero.param_shapes)
            for (const auto& [name, shape] : group) {
                uint64_t n = 0;
                if (!volume_of(shape, name, n))
                    return false;
                const uint64_t piece = (n + m_world - 1) / m_world;
                if (piece > ranks[0].size - offset)
                    return inconsistent(ProblemKind::size_mismatch, *m_optim.front(),
                                        "ends its flat groups ('" + printable(key(0)) +
                                            "', ...: " + std::to_string(ranks[0].size) +
                                            " elements) before its piece of parameter '" + printable(name) + "'");
                std::vector<TensorPart> parts;
                for (std::size_t r = 0; r < ranks.size() && r * piece < n; ++r)
                    ranks[r].take(offset, std::min(piece, n - r * piece), r * piece, element, parts);
                add(name, *type, shape, std::move(parts));
                offset += piece;
            }
        if (offset != ranks[0].size)
            return inconsistent(ProblemKind::size_mismatch, *m_optim.front(),
                                "holds " + std::to_string(ranks[0].size) + " elements of '" + printable(key(0)) +
                                    "', ..., but its pieces of the parameters param_shapes lists in " +
                                    printable(m_model->file.file) + " take " + std::to_string(offset));
        return true;
    }

    // Frozen parameters: whole in the model file (stages 1, 2), or a piece of ceil(n / world) in
    // every rank's (stage 3).
    bool add_frozen()
    {
        for (const auto& [name, shape] : m_model->zero.frozen_param_shapes) {
            uint64_t n = 0;
            if (!volume_of(shape, name, n))
                return false;
            const std::string key = "frozen_param_fragments." + name;
            Flat flat;
            std::optional<ElementType> type;
            if (!flat_of(m_stage == 3 ? m_rank_models : std::vector<const TorchArchive*>{m_model}, key, flat, type))
                return false;
            const uint64_t held = m_stage == 3 ? (n + m_world - 1) / m_world * m_world : n;
            if (flat.size != held)
                return inconsistent(ProblemKind::size_mismatch, *m_model,
                                    "holds " + std::to_string(flat.size) + " elements of frozen parameter '" +
                                        printable(name) + "' (with the other ranks' pieces), not " +
                                        std::to_string(held));
            std::vector<TensorPart> parts;
            flat.take(0, n, 0, element_size(*type), parts);
            add(name, *type, shape, std::move(parts));
        }
        return true;
    }

    const std::vector<TorchArchive>& m_archives;
    const ContentOptions& m_options;
    ContentReport& m_report;
    const std::size_t m_before; // the files' own tensors come first
    std::vector<const TorchArchive*> m_optim, m_models; // in rank order
    std::vector<const TorchArchive*> m_rank_models; // stage 3: zero_pp_rank_R's model file of every rank R
    const TorchArchive* m_model = nullptr; // the one whose param_shapes are read
    uint64_t m_world = 1;
    int64_t m_stage = 0;
    std::string m_state; // what is being put together: "" for the model, else a moment's name
    std::set<std::string> m_partitions; // the files' tensors the assembled ones are read from
};

} // namespace

void assemble_zero(const std::vector<TorchArchive>& archives, const ContentOptions& options, ContentReport& report)
{
    ZeroAssembly(archives, options, report).run();
}

} // namespace shardscope::inspect
