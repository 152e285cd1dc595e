// Megatron's per-rank files read as one model (internal/layout.h): tensor-parallel slices put back
// together, pipeline stages' layers numbered as the model numbers them.
//
// Which dimension a
// parameter is split on is not in the files; it follows from the layer class that owns it, which
// Megatron-LM names the same way in every checkpoint it writes (legacy ParallelTransformer and
// Megatron Core alike), and which its own checkpoint tools merge by:
//   column-parallel layers and the vocabulary-parallel embedding and output layer (and the last
//   stage's copy of a tied embedding): split on rows (dimension 0), weight and bias;
//   row-parallel layers: weight split on columns (dimension 1), bias whole on every rank;
//   norms and position embeddings: whole on every rank.
// A gated MLP (SwiGLU) keeps both halves of its first layer on each rank: rank r holds
// [gate_r; up_r], and the whole tensor is [gate_0 ... gate_{t-1}; up_0 ... up_{t-1}].

#include "core/inspect/internal/layout.h"

#include "core/util/volume.h"

#include <algorithm>
#include <map>
#include <set>

namespace shardscope::inspect {

namespace {

enum class Split { unknown, whole, rows, columns, first_layer };

std::string_view last_component(std::string_view path)
{
    const std::size_t dot = path.rfind('.');
    return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

Split megatron_split(std::string_view name, bool old_qkv_order)
{
    const std::size_t dot = name.rfind('.');
    if (dot == std::string_view::npos)
        return Split::unknown;
    const std::string_view param = name.substr(dot + 1), path = name.substr(0, dot);
    const std::string_view module = last_component(path);
    const std::string_view parent =
        module.size() < path.size() ? last_component(path.substr(0, path.size() - module.size() - 1)) : "";
    // MoE experts may be split over tensor-parallel ranks or not, and the ranks may hold different
    // experts under the same local names (expert-tensor and expert-parallel sizes, which are in no
    // file name); Mamba's mixer splits its norm. Neither is joined by these rules.
    if (name.find(".experts.") != std::string_view::npos || name.find("deepspeed_moe") != std::string_view::npos ||
        name.find(".mixer.") != std::string_view::npos)
        return Split::unknown;
    if (param.starts_with("layer_norm_")) // Transformer Engine's norm fused into linear_qkv / linear_fc1
        return Split::whole;
    if (param != "weight" && param != "bias")
        return Split::unknown;
    if (module.ends_with("norm") || module == "position_embeddings" || module == "router")
        return Split::whole;
    // Before checkpoint_version 2.0 Megatron stored a rank's QKV rows q, k, v of all its heads in
    // turn (or interleaved otherwise), so the ranks' rows laid one after another are no whole QKV.
    if (old_qkv_order && (module == "query_key_value" || module == "key_value"))
        return Split::unknown;
    if (module == "word_embeddings" || module == "word_embeddings_for_head" || module == "output_layer" ||
        module == "query_key_value" || module == "query" || module == "key_value" || module == "linear_qkv")
        return Split::rows;
    if (module == "dense_h_to_4h" || module == "linear_fc1")
        return Split::first_layer;
    const bool attention_output = module == "dense" &&
        (parent == "self_attention" || parent == "attention" || parent == "inter_attention" ||
         parent == "cross_attention");
    if (attention_output || module == "dense_4h_to_h" || module == "linear_proj" || module == "linear_fc2")
        return param == "weight" ? Split::columns : Split::whole;
    return Split::unknown;
}

// The MLP's second layer beside a first layer's parameter: its weight's columns are the first
// layer's rows on the same rank, or half of them when the first layer is gated.
std::string second_layer_weight(const std::string& name)
{
    const std::size_t dot = name.rfind('.');
    const std::string path = name.substr(0, dot);
    const std::size_t module = path.rfind('.') + 1; // 0 when there is no dot
    const std::string_view first = std::string_view(path).substr(module);
    return path.substr(0, module) + (first == "dense_h_to_4h" ? "dense_4h_to_h" : "linear_fc2") + ".weight";
}

} // namespace

int tensor_parallel_rank(std::string_view file)
{
    for (const std::string_view marker : {"mp_rank_", "-model_"}) {
        const std::size_t at = file.find(marker);
        if (at == std::string_view::npos)
            continue;
        int rank = 0;
        std::size_t p = at + marker.size();
        if (p >= file.size() || file[p] < '0' || file[p] > '9')
            return -1;
        for (; p < file.size() && file[p] >= '0' && file[p] <= '9' && rank < (1 << 20); ++p)
            rank = rank * 10 + (file[p] - '0');
        return rank;
    }
    return -1;
}

bool join_tensor_parallel(TensorContent& tensor, std::vector<std::vector<uint64_t>> shapes, int ranks,
                          bool old_qkv_order, const StoredShape& stored_shape, const SameValues& same_values)
{
    const std::size_t count = tensor.parts.size();
    if (count < 2 || shapes.size() != count || count != std::size_t(ranks))
        return false; // a rank whose file lacks the tensor: not the slices of one
    const Split split = megatron_split(tensor.name, old_qkv_order);
    if (split == Split::unknown)
        return false;
    // One slice per tensor-parallel rank 0 .. t-1, each a plain run of its own file (not a ZeRO
    // partition, whose pieces are flat), all of one shape.
    std::vector<std::size_t> order(count);
    for (std::size_t i = 0; i < count; ++i)
        order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return tensor_parallel_rank(tensor.parts[a].file) < tensor_parallel_rank(tensor.parts[b].file);
    });
    for (std::size_t r = 0; r < count; ++r) {
        const TensorPart& p = tensor.parts[order[r]];
        if (tensor_parallel_rank(p.file) != int(r) || p.file.find("zero_pp_rank_") != std::string::npos ||
            !p.view_shape.empty() || p.zstd_length != 0 || shapes[order[r]] != shapes[order[0]])
            return false;
    }
    const std::vector<uint64_t> slice = shapes[order[0]];
    if (split == Split::whole) {
        // Copies that differ are no one tensor (diverged ranks, or a tensor split after all): read
        // end to end, each rank's values counted.
        if (!same_values(tensor.parts))
            return false;
        TensorPart kept = tensor.parts[order[0]];
        kept.first_element = 0;
        tensor.parts = {std::move(kept)};
        tensor.shape = slice;
        return true;
    }
    const std::size_t dim = split == Split::columns ? 1 : 0;
    if (slice.size() <= dim || slice[dim] == 0)
        return false;
    bool gated = false;
    if (split == Split::first_layer) {
        const auto second = stored_shape(second_layer_weight(tensor.name));
        if (!second || second->size() != 2)
            return false; // whether it is gated cannot be told
        if ((*second)[1] <= slice[0] / 2 && slice[0] == 2 * (*second)[1])
            gated = true;
        else if (slice[0] != (*second)[1])
            return false;
    }
    std::vector<uint64_t> whole = slice;
    if (__builtin_mul_overflow(slice[dim], uint64_t(count), &whole[dim]))
        return false;
    uint64_t row_elements = 1; // elements of one index of dimension 0 in a slice
    for (std::size_t d = 1; d < slice.size(); ++d)
        row_elements *= slice[d]; // the slice's volume was checked when it was laid out
    const uint64_t element = element_size(tensor.type);
    std::vector<TensorPart> boxes;
    uint64_t first = 0;
    for (std::size_t r = 0; r < count; ++r) {
        const TensorPart& p = tensor.parts[order[r]];
        auto box = [&](uint64_t row_in_slice, uint64_t rows, uint64_t row_in_whole) {
            TensorPart b = p;
            b.byte_offset = p.byte_offset + row_in_slice * row_elements * element;
            b.numel = rows * row_elements;
            b.first_element = first;
            b.box_offsets.assign(slice.size(), 0);
            b.box_sizes = slice;
            b.box_sizes[0] = rows;
            b.box_offsets[0] = row_in_whole;
            first += b.numel;
            boxes.push_back(std::move(b));
        };
        if (gated) { // [gate_r; up_r] -> rows r*h of the gates and h*t + r*h of the ups
            const uint64_t half = slice[0] / 2;
            box(0, half, r * half);
            box(half, half, uint64_t(count) * half + r * half);
        } else if (dim == 0) {
            box(0, slice[0], r * slice[0]);
        } else {
            box(0, slice[0], 0);
            boxes.back().box_offsets[1] = r * slice[1];
        }
    }
    tensor.parts = std::move(boxes);
    tensor.shape = std::move(whole);
    return true;
}

namespace {

// A tensor of the model as a stage saves it: "model.<path>", or with a virtual pipeline
// "model<c>.<path>" for its c-th model chunk; `layer` is where the index of "layers.<i>." is in
// the name, [begin, end) of its digits, when the path has one.
struct ModelTensor {
    int chunk = -1; // -1: "model." without a chunk number
    std::size_t path = 0; // where <path> begins
    std::optional<std::pair<std::size_t, std::size_t>> layer;
    uint64_t index = 0;
};
std::optional<ModelTensor> model_tensor(std::string_view name)
{
    if (!name.starts_with("model"))
        return std::nullopt;
    ModelTensor out;
    std::size_t p = 5;
    for (; p < name.size() && name[p] >= '0' && name[p] <= '9' && p < 10; ++p)
        out.chunk = (out.chunk < 0 ? 0 : out.chunk * 10) + (name[p] - '0');
    if (p >= name.size() || name[p] != '.')
        return std::nullopt;
    out.path = p + 1;
    const std::size_t at = name.find(".layers.", p);
    if (at == std::string_view::npos)
        return out;
    std::size_t end = at + 8;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9' && end - (at + 8) < 9)
        out.index = out.index * 10 + uint64_t(name[end++] - '0');
    if (end > at + 8 && end < name.size() && name[end] == '.')
        out.layer = std::pair(at + 8, end);
    return out;
}

// A path with an "embedding" module (the input embedding, which only the first stage holds).
bool embedding_path(std::string_view path)
{
    return path.starts_with("embedding.") || path.find(".embedding.") != std::string_view::npos;
}

} // namespace

int pipeline_stage(std::string_view group)
{
    constexpr std::string_view marker = "mp_rank_*_";
    const std::size_t at = group.find(marker);
    if (at == std::string_view::npos)
        return -1;
    int stage = 0;
    std::size_t p = at + marker.size();
    const std::size_t begin = p;
    for (; p < group.size() && group[p] >= '0' && group[p] <= '9' && stage < (1 << 20); ++p)
        stage = stage * 10 + (group[p] - '0');
    return p > begin && p < group.size() && group[p] == '/' ? stage : -1;
}

LayerNumbering number_stage_layers(const std::vector<std::pair<std::string, std::string>>& tensors,
                                   const std::set<int>& stages)
{
    const LayerNumbering as_saved = [](const std::string&, const std::string& name) { return name; };
    if (stages.size() < 2 || *stages.begin() != 0 || *stages.rbegin() + 1 != int(stages.size()))
        return as_saved; // no stages, or one missing
    // Per layer stack (the path before ".layers.": a decoder, an encoder, a vision tower, MTP
    // layers) and (model chunk, stage), its local layer indices: Megatron places chunk c of stage
    // s after every chunk before c on all stages and chunk c of the stages before s.
    using Place = std::pair<int, int>; // (chunk, stage)
    std::map<std::string, std::map<Place, std::set<uint64_t>>> layers;
    std::set<Place> present;
    std::set<bool> chunked;
    for (const auto& [group, name] : tensors) {
        const int stage = pipeline_stage(group);
        const auto tensor = model_tensor(name);
        if (stage < 0 || !tensor)
            continue;
        chunked.insert(tensor->chunk >= 0);
        const Place place(std::max(tensor->chunk, 0), stage);
        present.insert(place);
        // The input embedding on a later stage or chunk: the folders are not pipeline stages (an
        // expert-parallel rank's mp_rank_TT_EEE holds the whole dense model too).
        if (place != Place(0, 0) && embedding_path(std::string_view(name).substr(tensor->path)))
            return as_saved;
        if (tensor->layer)
            layers[name.substr(tensor->path, tensor->layer->first - tensor->path)][place].insert(tensor->index);
    }
    if (chunked.size() != 1)
        return as_saved;
    // Every chunk 0 .. v-1 of every stage holds part of the model: else the offsets cannot be told.
    const int chunks = present.empty() ? 0 : present.rbegin()->first + 1;
    for (int c = 0; c < chunks; ++c)
        for (const int stage : stages)
            if (!present.contains({c, stage}))
                return as_saved;
    std::map<std::pair<std::string, Place>, uint64_t> offset;
    for (const auto& [stack, places] : layers) {
        uint64_t next = 0;
        for (const auto& [place, indices] : places) { // (chunk, stage) order
            if (*indices.rbegin() + 1 != indices.size())
                return as_saved; // not numbered 0 .. k-1
            offset[{stack, place}] = next;
            next += indices.size();
        }
    }
    return [offset](const std::string& group, const std::string& saved) {
        const int stage = pipeline_stage(group);
        const auto tensor = model_tensor(saved);
        if (stage < 0 || !tensor)
            return saved;
        std::string name = saved;
        if (tensor->layer) {
            const std::string stack = saved.substr(tensor->path, tensor->layer->first - tensor->path);
            const uint64_t add = offset.at({stack, Place(std::max(tensor->chunk, 0), stage)});
            name.replace(tensor->layer->first, tensor->layer->second - tensor->layer->first,
                         std::to_string(tensor->index + add));
        }
        name.replace(0, tensor->path, "model."); // the chunks are one model
        return name;
    };
}

} // namespace shardscope::inspect
