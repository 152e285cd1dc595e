// shardctl convert: verify the source, lay its tensors out, write them into a temporary folder,
// verify that, rename it into place.

#include "core/convert/convert.h"

#include "core/convert/internal/cast.h"
#include "core/convert/internal/job.h"
#include "core/inspect/internal/dequantize.h"
#include "core/open/verify.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <cstring>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTargets[] = {"hf", "dcp", "shardscope"};
constexpr std::string_view kDtypes[] = {"keep", "bf16", "f16", "f32"};
constexpr std::string_view kStates[] = {"model", "model+optimizer"};

template <typename Enum, std::size_t N>
std::optional<Enum> from_names(const std::string_view (&names)[N], std::string_view text)
{
    for (std::size_t i = 0; i < N; ++i)
        if (names[i] == text)
            return static_cast<Enum>(i);
    return std::nullopt;
}

ElementType target_type(ConvertDtype dtype, ElementType from)
{
    switch (dtype) {
    case ConvertDtype::bf16: return convert::cast_type(from, ElementType::BF16);
    case ConvertDtype::f16: return convert::cast_type(from, ElementType::F16);
    case ConvertDtype::f32: return convert::cast_type(from, ElementType::F32);
    case ConvertDtype::keep: break;
    }
    return from;
}

// The output refuses what reshard refuses: the source or a folder inside it, a file, a non-empty
// folder.
void check_destination(const fs::path& source_dir, const fs::path& out)
{
    std::error_code ec;
    const fs::path src = source_dir.empty() ? fs::path() : fs::weakly_canonical(source_dir, ec);
    const fs::path dst = fs::weakly_canonical(out, ec);
    const auto [s, d] = std::mismatch(src.begin(), src.end(), dst.begin(), dst.end());
    if (!src.empty() && s == src.end())
        throw Error(ProblemKind::invalid_argument,
                    out.string() + ": the output must not be the source checkpoint or inside it (" + src.string() + ")",
                    out.string());
    if (fs::exists(fs::symlink_status(out, ec))) {
        if (!fs::is_directory(fs::symlink_status(out, ec)))
            throw Error(ProblemKind::already_exists, out.string() + " exists and is not a directory", out.string());
        if (!fs::is_empty(out, ec))
            throw Error(ProblemKind::already_exists,
                        out.string() + " exists and is not empty; refusing to write into it", out.string());
    }
}

// The first key of a torch.save tensor's path, past the "<file pattern>: " that names the
// pipeline stage or layer file when the same path recurs in several (stats' naming).
std::string first_key(const TensorContent& tensor)
{
    std::string_view name = tensor.name;
    if (const std::size_t colon = name.find(": "); colon != std::string_view::npos) {
        const std::string_view file = name.substr(0, colon);
        if (file.ends_with(".pt") || file.ends_with(".pth") || file.ends_with(".bin"))
            name.remove_prefix(colon + 2);
    }
    return std::string(name.substr(0, name.find('.')));
}

// A foreign tensor that is optimizer state, by the names the training frameworks save it under:
// DeepSpeed's *optim_states.pt files, and keys under optimizer / optimizer_state_dict / optim
// (Megatron's model_optim_rng.pt, DeepSpeed's optimizer files, torchtitan's DCP).
bool is_optimizer_tensor(const TensorContent& tensor)
{
    const std::string first = first_key(tensor);
    if (first == "optimizer" || first == "optimizer_state_dict" || first == "optim")
        return true;
    return !tensor.parts.empty() && std::all_of(tensor.parts.begin(), tensor.parts.end(), [](const TensorPart& p) {
        return p.file.find("optim_states") != std::string::npos;
    });
}

// The tensors to write, in the source's order, and their names: a ShardScope param (and a foreign
// tensor) keeps its name; with model+optimizer, ShardScope's other states become
// optim.<state>.<name> and a foreign format's optimizer tensors keep theirs.
void pick_tensors(const ContentReport& layout, ConvertStates states, std::vector<std::size_t>& picked,
                  std::vector<ConvertedTensor>& tensors)
{
    // A DeepSpeed ZeRO checkpoint's model (and its Adam moments) is the one put together from its
    // flat partitions: the files' own tensors (16-bit copies, ZeRO-3's empty placeholders, the flat
    // groups) are not written then.
    if (!layout.zero_unassembled.empty())
        throw Error(ProblemKind::invalid_argument,
                    layout.dir.string() +
                        ": this DeepSpeed ZeRO checkpoint's model cannot be converted: " + layout.zero_unassembled);
    const bool assembled =
        std::any_of(layout.tensors.begin(), layout.tensors.end(), [](const TensorContent& t) { return t.assembled; });
    // Its optimizer: the moments put together per parameter, or (another optimizer's state, moments
    // that did not fit) the files' optimizer tensors as they are.
    const bool assembled_moments = std::any_of(layout.tensors.begin(), layout.tensors.end(),
                                               [](const TensorContent& t) { return t.assembled && !t.state.empty(); });
    std::set<std::string> names;
    for (std::size_t t = 0; t < layout.tensors.size(); ++t) {
        const TensorContent& tensor = layout.tensors[t];
        // Megatron's random-generator states (a rank's place in the run) and Transformer Engine's
        // _extra_state (its FP8 scaling history, serialized bytes) are neither model nor optimizer.
        if (tensor.state.empty() && !tensor.assembled &&
            (first_key(tensor) == "rng_state" || tensor.name.ends_with("._extra_state")))
            continue;
        const bool model = tensor.assembled ? tensor.state.empty()
            : tensor.state.empty()          ? !is_optimizer_tensor(tensor)
                                            : tensor.state == "param";
        if (!model && states == ConvertStates::model)
            continue;
        if (assembled && !tensor.assembled && (model || assembled_moments))
            continue;
        // Slices of several rank files laid end to end are the model only where the format says
        // so: a DeepSpeed optimizer partition (its flat group). Megatron's tensor-parallel slices
        // were joined where its layers' rules place them; for the rest which dimension was split,
        // or whether they are replicas, is nowhere in the files.
        if (tensor.concatenated && !std::all_of(tensor.parts.begin(), tensor.parts.end(), [](const TensorPart& p) {
                return p.file.find("optim_states") != std::string::npos;
            }))
            throw Error(ProblemKind::invalid_argument,
                        inspect::file_of(layout, tensor) + ": tensor '" + printable(tensor.name) + "' is held by " +
                            std::to_string(tensor.parts.size()) +
                            (tensor.parts.size() == 1 ? " rank file" : " rank files") +
                            " (tensor-parallel slices or replicas) that no rule of Megatron's layers joins (not a "
                            "layer it splits, a rank without it, copies that differ, or slices that do not fit its "
                            "split): convert writes whole tensors only (stats and diff read the slices end to end)");
        const bool native_state = !model && !tensor.state.empty();
        const std::string name = native_state ? "optim." + tensor.state + "." + tensor.name : tensor.name;
        try {
            (void)nlohmann::json(name).dump(); // safetensors headers and the index are JSON: UTF-8 only
        } catch (const nlohmann::json::exception&) {
            throw Error(ProblemKind::invalid_argument,
                        layout.dir.string() + ": tensor '" + printable(name) + "': its name is not valid UTF-8");
        }
        uint64_t numel = 0;
        if (!checked_volume(tensor.shape, numel) || numel > (uint64_t(1) << 58))
            throw Error(ProblemKind::invalid_manifest,
                        layout.dir.string() + ": tensor '" + printable(name) +
                            "': its shape's element count overflows");
        if (!names.insert(name).second)
            throw Error(ProblemKind::invalid_argument,
                        layout.dir.string() + ": two tensors would both be named '" + printable(name) + "'");
        picked.push_back(t);
        tensors.push_back({.name = name,
                           .source_name = tensor.name,
                           .source_state = tensor.state,
                           .model = model,
                           .dtype_in = std::string(to_string(tensor.type)),
                           .shape = tensor.shape});
    }
}

// With a cast, FP8 weights are written as the values they stand for: each paired with its
// `_scale_inv` block scales (core/inspect's pairing, as stats and diff read them) and multiplied
// piece by piece as it is copied; the scale tensors, which nothing in the output uses then, are left
// out. An FP8 tensor without usable scales is refused: cast raw, it would silently not be the model.
void dequantize_fp8_for_cast(ContentReport& layout, ConvertDtype dtype, std::vector<std::size_t>& picked,
                             std::vector<ConvertedTensor>& tensors)
{
    const std::vector<inspect::UnpairedFp8> unpaired = inspect::pair_fp8_weights(layout);
    const std::set<std::size_t> written(picked.begin(), picked.end());
    for (const inspect::UnpairedFp8& u : unpaired) {
        if (!written.contains(u.weight))
            continue;
        const TensorContent& weight = layout.tensors[u.weight];
        const std::string scale_name = weight.name + std::string(inspect::kScaleSuffix);
        const std::string head =
            "FP8 tensor '" + printable(weight.name) + "' cannot be cast to " + std::string(to_string(dtype)) + ": ";
        if (!u.scale)
            throw Error(ProblemKind::invalid_argument,
                        inspect::file_of(layout, weight) + ": " + head + "it has no scale tensor '" +
                            printable(scale_name) + "' to dequantize it by (--dtype keep carries it as stored)");
        const TensorContent& scale = layout.tensors[*u.scale];
        throw Error(ProblemKind::invalid_fp8_scale,
                    inspect::file_of(layout, scale) + ": " + head + "its scale tensor '" + printable(scale_name) +
                        "' cannot dequantize it (" + u.why + ")");
    }
    std::set<std::size_t> partners;
    for (std::size_t i = 0; i < picked.size(); ++i)
        if (const int scale = layout.tensors[picked[i]].scale; scale >= 0) {
            partners.insert(static_cast<std::size_t>(scale));
            tensors[i].dequantized_by = layout.tensors[static_cast<std::size_t>(scale)].name;
        }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < picked.size(); ++i)
        if (!partners.contains(picked[i])) {
            if (kept != i) { // never a self-move, which may empty the strings
                picked[kept] = picked[i];
                tensors[kept] = std::move(tensors[i]);
            }
            ++kept;
        }
    picked.resize(kept);
    tensors.resize(kept);
}

VerifyReport verify_or_throw(const storage::Location& path, const ConvertOptions& options, const std::string& what,
                             const std::function<void(uint64_t, uint64_t)>& progress)
{
    VerifyOptions verify;
    verify.threads = options.threads;
    verify.cancel = options.cancel;
    verify.callbacks.progress = progress;
    VerifyReport report = verify_checkpoint(path, verify);
    if (report.cancelled)
        throw Error(ProblemKind::cancelled, storage::to_string(path) + ": conversion cancelled");
    if (!report.ok()) {
        Problem first = report.problems.front();
        first.message = what + first.message;
        throw Error(first);
    }
    return report;
}

} // namespace

std::string_view to_string(ConvertTarget target)
{
    return kTargets[static_cast<int>(target)];
}
std::string_view to_string(ConvertDtype dtype)
{
    return kDtypes[static_cast<int>(dtype)];
}
std::string_view to_string(ConvertStates states)
{
    return kStates[static_cast<int>(states)];
}
std::optional<ConvertTarget> convert_target_from_string(std::string_view text)
{
    return from_names<ConvertTarget>(kTargets, text);
}
std::optional<ConvertDtype> convert_dtype_from_string(std::string_view text)
{
    return from_names<ConvertDtype>(kDtypes, text);
}
std::optional<ConvertStates> convert_states_from_string(std::string_view text)
{
    return from_names<ConvertStates>(kStates, text);
}

std::optional<uint64_t> parse_byte_size(std::string_view text)
{
    std::size_t digits = 0;
    uint64_t value = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        if (__builtin_mul_overflow(value, 10u, &value) || __builtin_add_overflow(value, text[digits] - '0', &value))
            return std::nullopt;
        ++digits;
    }
    if (digits == 0)
        return std::nullopt;
    std::string unit(text.substr(digits));
    for (char& c : unit)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    static const std::pair<const char*, uint64_t> kUnits[] = {{"", 1},
                                                              {"B", 1},
                                                              {"KB", 1000},
                                                              {"MB", 1000000},
                                                              {"GB", 1000000000},
                                                              {"TB", 1000000000000},
                                                              {"KIB", 1ull << 10},
                                                              {"MIB", 1ull << 20},
                                                              {"GIB", 1ull << 30},
                                                              {"TIB", 1ull << 40}};
    for (const auto& [name, factor] : kUnits)
        if (unit == name) {
            uint64_t bytes = 0;
            if (__builtin_mul_overflow(value, factor, &bytes) || bytes == 0)
                return std::nullopt;
            return bytes;
        }
    return std::nullopt;
}

ConvertResult convert_checkpoint(const storage::Location& source, const fs::path& given_out,
                                 const ConvertOptions& options)
{
    const auto started = std::chrono::steady_clock::now();
    ConvertResult result{.source = storage::to_string(source), .out = given_out, .options = options};
    // "out/" names the folder "out"; "." and ".." cannot be renamed onto.
    const fs::path out = given_out.has_filename() ? given_out : given_out.parent_path();
    if (out.empty() || out.filename() == "." || out.filename() == "..")
        throw Error(ProblemKind::invalid_argument,
                    given_out.string() + ": the output must name a new folder (not '.' or '..')", given_out.string());
    if (options.world_size < 1)
        throw Error(ProblemKind::invalid_argument,
                    "the world size must be at least 1, not " + std::to_string(options.world_size));
    if (options.target == ConvertTarget::hf && options.world_size != 1)
        throw Error(ProblemKind::invalid_argument,
                    "a Hugging Face folder has no ranks: the world size applies to dcp and shardscope only");

    // Progress over the three passes: the source's bytes read by verify, the output's written,
    // then read back. The output's size is known once the tensors are laid out; reading it back
    // counts its files' bytes, headers and index too, so that pass's own total replaces the
    // estimate once its verify gives it (else the bar would end past 100 %).
    uint64_t source_total = 0, copy_total = 0, readback_total = 0;
    const auto report = [&](uint64_t done) {
        if (options.progress)
            options.progress(done, source_total + copy_total + (readback_total ? readback_total : copy_total));
    };
    const VerifyReport verified = verify_or_throw(source, options, "", [&](uint64_t done, uint64_t total) {
        source_total = total;
        copy_total = std::max(copy_total, total);
        report(done);
    });
    // The step verify read, not the root again: a training job may move `latest` meanwhile.
    const storage::Location step = verified_location(source, verified);
    // A single file's output may sit beside it; a folder's never inside it (a bucket's output,
    // on a local disk, cannot be).
    if (step.is_local())
        check_destination(step.path, out);
    else
        check_destination({}, out);

    ContentOptions layout_options;
    layout_options.cancel = options.cancel;
    // Kept, an FP8 weight is carried as stored and its scales are a tensor of their own; cast, it
    // is paired with them below.
    layout_options.raw_fp8 = true;
    ContentReport layout = plan_content(step, layout_options);
    if (!layout.problems.empty())
        throw Error(layout.problems.front());
    // An output without a tensor the source holds is not that checkpoint.
    if (!layout.left_out.empty()) {
        Problem p = layout.left_out.front();
        p.message += "; convert would leave it out of the output";
        throw Error(p);
    }
    result.source = storage::to_string(step);
    result.source_format = layout.format;

    std::vector<std::size_t> picked;
    pick_tensors(layout, options.states, picked, result.tensors);
    if (options.dtype != ConvertDtype::keep)
        dequantize_fp8_for_cast(layout, options.dtype, picked, result.tensors);
    std::vector<ElementType> out_types;
    for (std::size_t i = 0; i < picked.size(); ++i) {
        out_types.push_back(target_type(options.dtype, layout.tensors[picked[i]].type));
        result.tensors[i].dtype_out = std::string(to_string(out_types.back()));
    }

    // The output is written beside its final place, so that one rename commits it.
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    const std::string tmp_name = "." + out.filename().string() + ".convert-" + std::to_string(::getpid()) + ".tmp";
    const fs::path tmp = parent / tmp_name;
    fsutil::make_directories(parent, options.durable);
    const fsutil::UniqueFd parent_fd = fsutil::open_directory(parent);
    fsutil::remove_tree_at(parent_fd.get(), tmp_name); // a crashed conversion of this process id's
    if (::mkdirat(parent_fd.get(), tmp_name.c_str(), 0755) != 0)
        throw Error(ProblemKind::io_error,
                    tmp.string() + ": cannot create the temporary output folder: " + std::strerror(errno));
    try {
        const fsutil::UniqueFd out_fd = fsutil::open_directory(tmp);
        convert::ConvertJob job{.source = layout,
                                .out_fd = out_fd.get(),
                                .out_dir = tmp,
                                .options = options,
                                .picked = picked,
                                .tensors = result.tensors,
                                .out_types = out_types};
        for (std::size_t i = 0; i < picked.size(); ++i)
            job.copy_total += convert::output_bytes(job, i);
        copy_total = job.copy_total;
        job.progress = [&](uint64_t copied) {
            copy_total = job.copy_total; // a writer may count what it writes its own way
            report(source_total + copied);
        };
        result.tensor_bytes = job.copy_total;
        // The training step the source records: a ShardScope manifest's, DeepSpeed's global_stepN,
        // Megatron's iteration.
        if (verified.manifest)
            job.step = verified.manifest->step;
        else if (verified.foreign && verified.foreign->step.value_or(-1) >= 0)
            job.step = static_cast<uint64_t>(*verified.foreign->step);
        result.files = options.target == ConvertTarget::hf ? convert::write_hf(job)
            : options.target == ConvertTarget::dcp         ? convert::write_dcp(job)
                                                           : convert::write_shardscope(job);
        result.tensor_bytes = job.copy_total;
        if (options.durable)
            fsutil::fsync_or_throw(out_fd.get(), tmp.string());

        result.output_verify =
            verify_or_throw(tmp, options, "the converted output does not verify: ", [&](uint64_t done, uint64_t total) {
                readback_total = total;
                report(source_total + copy_total + done);
            });
        if (::renameat(parent_fd.get(), tmp_name.c_str(), parent_fd.get(), out.filename().c_str()) != 0)
            throw Error(ProblemKind::io_error,
                        out.string() + ": cannot rename the converted folder into place: " + std::strerror(errno),
                        out.string());
    } catch (...) {
        fsutil::remove_tree_at(parent_fd.get(), tmp_name);
        throw;
    }
    if (options.durable)
        fsutil::fsync_or_throw(parent_fd.get(), parent.string());
    result.output_verify.dir = out;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return result;
}

nlohmann::json convert_result_json(const ConvertResult& result)
{
    nlohmann::json files = nlohmann::json::array();
    uint64_t bytes = 0;
    for (const ConvertedFile& f : result.files) {
        files.push_back({{"name", f.name}, {"bytes", f.bytes}});
        bytes += f.bytes;
    }
    std::size_t cast = 0, dequantized = 0;
    for (const ConvertedTensor& t : result.tensors) {
        cast += t.dtype_in != t.dtype_out;
        dequantized += !t.dequantized_by.empty();
    }
    nlohmann::json j = {{"ok", true},
                        {"source", {{"path", result.source.string()}, {"format", result.source_format}}},
                        {"out", result.out.string()},
                        {"to", to_string(result.options.target)},
                        {"dtype", to_string(result.options.dtype)},
                        {"states", to_string(result.options.states)},
                        {"tensors", result.tensors.size()},
                        {"tensors_cast", cast},
                        {"fp8_dequantized", dequantized},
                        {"tensor_bytes", result.tensor_bytes},
                        {"files", files},
                        {"bytes", bytes},
                        {"verified", true},
                        {"seconds", result.seconds}};
    if (result.options.target == ConvertTarget::hf)
        j["max_shard_size"] = result.options.max_shard_bytes;
    if (result.options.target != ConvertTarget::hf)
        j["world_size"] = result.options.world_size;
    return j;
}

} // namespace shardscope
