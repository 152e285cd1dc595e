// --to shardscope: the model's tensors laid end to end in the flat parameter vector, rank r of M
// holding [floor(P·r/M), floor(P·(r+1)/M)) as reshard lays it out, each rank file streamed
// through the shard writer (hashed as written), and the manifest committed last (format.md, 5).
// The four states: param in the 16-bit dtype; master, exp_avg and exp_avg_sq from the source's
// optimizer state with model+optimizer (a ShardScope source's own states, DeepSpeed's assembled
// moments, or a DCP's `optimizer.state.*` tensors matched to their parameters by name), otherwise
// the master is the source's value in F32 and the two moments are zero (a fresh optimizer).

#include "core/checkpoint/internal/shardfile.h"
#include "core/checkpoint/manifest.h"
#include "core/checkpoint/save.h"
#include "core/convert/internal/job.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace shardscope::convert {

namespace {

constexpr const char* kStates[4] = {"param", "master", "exp_avg", "exp_avg_sq"};

// Where one state of one flat tensor comes from: a source tensor read as `type`, or zeros.
struct StateSource {
    const TensorContent* tensor = nullptr;
    ElementType type = ElementType::F32;
};

struct FlatTensor {
    TensorInfo info;
    StateSource states[4];
};

ParamDtype param_dtype_for(const ConvertJob& job, const std::vector<std::size_t>& model)
{
    switch (job.options.dtype) {
    case ConvertDtype::bf16: return ParamDtype::BF16;
    case ConvertDtype::f16: return ParamDtype::F16;
    case ConvertDtype::f32:
        throw Error(ProblemKind::invalid_argument,
                    "--to shardscope keeps parameters in bf16 or f16: --dtype f32 cannot be written");
    case ConvertDtype::keep: break;
    }
    const ElementType first = model.empty() ? ElementType::BF16 : job.out_types[model.front()];
    for (const std::size_t i : model)
        if (job.out_types[i] != first || (first != ElementType::BF16 && first != ElementType::F16))
            throw Error(ProblemKind::invalid_argument,
                        job.source.dir.string() + ": tensor '" + printable(job.tensors[i].name) + "' is " +
                            job.tensors[i].dtype_out +
                            ": --to shardscope keeps parameters in one 16-bit dtype; give --dtype bf16 or f16");
    return first == ElementType::F16 ? ParamDtype::F16 : ParamDtype::BF16;
}

// A framework's optimizer tensor as the state of one parameter: torch's optimizer state dict as
// DCP saves it (`optimizer.state.<param>.exp_avg`, `optim.state.<param>.step`, the parameter named
// as the model's tensor or without its `model.` prefix) and Megatron's distributed checkpoint
// (`optimizer.state.exp_avg.<param>`, `optimizer.state.fp32_param.<param>`: its master weight).
struct OptimizerName {
    std::size_t model = 0; // index into job.tensors of the parameter
    std::string state; // master, exp_avg, exp_avg_sq or step
};

std::optional<OptimizerName> parameter_of(const std::string& name, const std::map<std::string, std::size_t>& model)
{
    std::string rest;
    for (const char* prefix : {"optimizer.state.", "optim.state."})
        if (name.starts_with(prefix))
            rest = name.substr(std::strlen(prefix));
    if (rest.empty())
        return std::nullopt;
    const auto find = [&](const std::string& param) -> std::optional<std::size_t> {
        for (const std::string& candidate : {param, "model." + param})
            if (auto it = model.find(candidate); it != model.end())
                return it->second;
        return std::nullopt;
    };
    static const std::pair<const char*, const char*> kStoredStates[] = {
        {"exp_avg", "exp_avg"}, {"exp_avg_sq", "exp_avg_sq"}, {"step", "step"}, {"fp32_param", "master"}};
    for (const auto& [stored, state] : kStoredStates) {
        const std::string s(stored);
        if (rest.starts_with(s + "."))
            if (auto p = find(rest.substr(s.size() + 1)))
                return OptimizerName{*p, state};
        if (rest.size() > s.size() + 1 && rest.ends_with("." + s))
            if (auto p = find(rest.substr(0, rest.size() - s.size() - 1)))
                return OptimizerName{*p, state};
    }
    return std::nullopt;
}

std::string printable_number(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return text;
}

// The value of a one-element tensor (Adam's `step`), read without counting it as written.
double read_scalar(ConvertJob& job, const TensorContent& tensor)
{
    struct Restore { // also when the read throws: the job reports progress again
        ConvertJob& job;
        uint64_t copied = job.copied;
        std::function<void(uint64_t)> progress = std::move(job.progress);
        ~Restore()
        {
            job.copied = copied;
            job.progress = std::move(progress);
        }
    } restore{job};
    job.progress = nullptr;
    double value = 0;
    copy_elements(job, tensor, ElementType::F64, 0, 1,
                  [&](const std::byte* p, std::size_t) { std::memcpy(&value, p, sizeof value); });
    return value;
}

// `steps`: the output tensors that are Adam's step counts; `steps_kept`: whether their value became
// the manifest's step (not where the source records its own).
std::vector<FlatTensor> lay_out_flat(ConvertJob& job, ParamDtype dtype, std::set<std::size_t>& steps, bool& steps_kept)
{
    std::vector<std::size_t> model;
    std::map<std::string, std::size_t> model_by_name;
    for (std::size_t i = 0; i < job.tensors.size(); ++i)
        if (job.tensors[i].model) {
            model.push_back(i);
            model_by_name[job.tensors[i].source_name] = i;
        }
    // The other states, by the output index of their parameter, when they are carried.
    std::map<std::pair<std::size_t, std::string>, const TensorContent*> states;
    std::optional<double> step; // Adam's step count, one for every parameter
    std::string step_tensor; // the tensor it was first read from
    for (std::size_t i = 0; i < job.tensors.size(); ++i) {
        const ConvertedTensor& t = job.tensors[i];
        if (t.model)
            continue;
        const TensorContent& source = job.source.tensors[job.picked[i]];
        const auto where = [&] { return job.source.dir.string() + ": tensor '" + printable(t.name) + "'"; };
        std::optional<OptimizerName> of;
        if (!t.source_state.empty()) {
            if (auto it = model_by_name.find(t.source_name); it != model_by_name.end())
                of = OptimizerName{it->second, t.source_state};
        } else {
            of = parameter_of(t.source_name, model_by_name);
        }
        if (!of) // no rule says which parameter it belongs to
            throw Error(ProblemKind::invalid_argument,
                        where() +
                            " is optimizer state of no parameter of the model by its name: --to shardscope carries "
                            "Adam's exp_avg, exp_avg_sq, step and a master weight only; give --states model");
        const TensorContent& param = job.source.tensors[job.picked[of->model]];
        if (of->state == "step") {
            uint64_t numel = 1;
            for (const uint64_t d : source.shape)
                numel *= d;
            if (numel != 1)
                throw Error(ProblemKind::invalid_argument,
                            where() + " is a step count of " + std::to_string(numel) + " elements, not one");
            const double value = read_scalar(job, source);
            if (!(value >= 0 && value < 9.0e15 && value == std::floor(value)))
                throw Error(ProblemKind::invalid_argument,
                            where() + ": its step count " + printable_number(value) + " is not a whole number");
            if (step && *step != value)
                throw Error(ProblemKind::invalid_argument,
                            where() + ": its step count " + printable_number(value) +
                                " differs from the step count of tensor '" + printable(step_tensor) + "' (" +
                                printable_number(*step) + "): a ShardScope checkpoint has one step");
            step = value;
            step_tensor = t.name;
            steps.insert(i);
            continue;
        }
        if (source.shape != param.shape || !is_floating(source.type))
            throw Error(ProblemKind::invalid_argument,
                        where() + " (" + std::string(to_string(source.type)) + ", " +
                            std::to_string(source.shape.size()) +
                            " dimensions) is not a floating tensor of the shape of "
                            "its parameter '" +
                            printable(param.name) + "'");
        if (!states.emplace(std::pair{of->model, of->state}, &source).second)
            throw Error(ProblemKind::invalid_argument,
                        where() + ": parameter '" + printable(param.name) + "' has its " + of->state + " twice");
    }
    for (const std::size_t i : model) // Adam's moments come in pairs: one alone is not a state to resume
        if (states.contains({i, "exp_avg"}) != states.contains({i, "exp_avg_sq"}))
            throw Error(
                ProblemKind::invalid_argument,
                job.source.dir.string() + ": parameter '" + printable(job.tensors[i].source_name) + "' has " +
                    (states.contains({i, "exp_avg"}) ? "exp_avg but no exp_avg_sq" : "exp_avg_sq but no exp_avg") +
                    ": --to shardscope carries both Adam moments or neither; give --states model");
    // The optimizer's step stands for the training step where the source records none (a DCP);
    // where it records one, that is the checkpoint's step and the step tensors are not written.
    if (step && !job.step) {
        job.step = static_cast<uint64_t>(*step);
        steps_kept = true;
    }
    std::vector<FlatTensor> flat;
    uint64_t offset = 0;
    const ElementType param_type = dtype == ParamDtype::BF16 ? ElementType::BF16 : ElementType::F16;
    for (const std::size_t i : model) {
        const TensorContent& source = job.source.tensors[job.picked[i]];
        if (!is_floating(source.type))
            throw Error(ProblemKind::invalid_argument,
                        job.source.dir.string() + ": tensor '" + printable(source.name) + "' is " +
                            std::string(to_string(source.type)) +
                            ": a ShardScope checkpoint holds floating-point parameters only");
        uint64_t numel = 1;
        for (const uint64_t d : source.shape)
            numel *= d;
        FlatTensor f{.info = {.name = job.tensors[i].name, .shape = source.shape, .offset = offset, .numel = numel}};
        f.states[0] = {.tensor = &source, .type = param_type};
        f.states[1] = {.tensor = &source, .type = ElementType::F32};
        for (int s = 1; s < 4; ++s)
            if (auto it = states.find({i, kStates[s]}); it != states.end())
                f.states[s] = {.tensor = it->second, .type = ElementType::F32};
        flat.push_back(f);
        offset += numel;
    }
    return flat;
}

} // namespace

std::vector<ConvertedFile> write_shardscope(ConvertJob& job)
{
    std::vector<std::size_t> model;
    for (std::size_t i = 0; i < job.tensors.size(); ++i)
        if (job.tensors[i].model)
            model.push_back(i);
    const ParamDtype dtype = param_dtype_for(job, model);
    std::set<std::size_t> steps;
    bool steps_kept = false;
    const std::vector<FlatTensor> flat = lay_out_flat(job, dtype, steps, steps_kept);
    const uint64_t total = flat.empty() ? 0 : flat.back().info.offset + flat.back().info.numel;
    const int world = job.options.world_size;
    // What is written: 14 bytes a parameter, whatever the states' sources.
    job.copy_total = total * 14;

    WriteOptions write;
    write.durable = job.options.durable;
    write.cancel = job.options.cancel;
    std::vector<ShardRecord> records;
    std::vector<ConvertedFile> files;
    std::vector<std::byte> zeros(kConvertPiece * 4), param(kConvertPiece * 2);
    for (int rank = 0; rank < world; ++rank) {
        const uint64_t begin = even_shard_offset(total, world, rank);
        const uint64_t end = even_shard_offset(total, world, rank + 1);
        ShardFileWriter writer(job.out_fd, job.out_dir, rank, write);
        const std::string header = rank_shard_header(rank, world, dtype, begin, end - begin);
        writer.write(header.data(), header.size());
        StateHealth health;
        for (int s = 0; s < 4; ++s) {
            const auto vector = static_cast<StateVector>(s);
            for (const FlatTensor& f : flat) {
                const uint64_t from = std::max(begin, f.info.offset);
                const uint64_t to = std::min(end, f.info.offset + f.info.numel);
                if (from >= to)
                    continue;
                const StateSource& source = f.states[s];
                uint64_t at = from - f.info.offset; // element of the tensor the next piece starts at
                const auto sink = [&](const std::byte* data, std::size_t bytes) {
                    const std::size_t count = bytes / element_size(source.type);
                    if (vector == StateVector::master) { // the same parameters, for their pairing
                        // Read again, not written: neither counted as copied nor reported.
                        const uint64_t copied = job.copied;
                        auto progress = std::move(job.progress);
                        job.progress = nullptr;
                        std::size_t filled = 0;
                        copy_elements(job, *f.states[0].tensor, f.states[0].type, at, count,
                                      [&](const std::byte* p, std::size_t n) {
                                          std::memcpy(param.data() + filled, p, n);
                                          filled += n;
                                      });
                        job.copied = copied;
                        job.progress = std::move(progress);
                    }
                    count_health(vector, dtype, data, count, param.data(), health);
                    writer.write(data, bytes);
                    at += count;
                };
                if (source.tensor) {
                    copy_elements(job, *source.tensor, source.type, at, to - from, sink);
                } else {
                    for (uint64_t left = to - from; left > 0;) {
                        const uint64_t n = std::min<uint64_t>(left, kConvertPiece);
                        sink(zeros.data(), n * 4);
                        job.copied += n * 4;
                        left -= n;
                    }
                }
            }
        }
        records.push_back(writer.finish(begin, end - begin));
        records.back().health = health;
        files.push_back({.name = records.back().path, .bytes = records.back().bytes});
    }
    CheckpointMeta meta{
        .world_size = world, .step = job.step.value_or(0), .param_dtype = dtype, .param_numel_total = total};
    for (const FlatTensor& f : flat)
        meta.tensors.push_back(f.info);
    commit(job.out_dir, std::move(records), meta, job.options.durable);
    for (std::size_t i = 0; i < job.tensors.size(); ++i) {
        ConvertedTensor& t = job.tensors[i];
        const bool step_count = steps.contains(i); // not written as values: the manifest's step, or nothing
        t.file = step_count ? (steps_kept ? "manifest.json" : "")
            : world == 1    ? shard_file_name(0)
                            : "rank*.safetensors";
        t.dtype_out = step_count ? t.dtype_in : t.model ? std::string(to_string(dtype)) : "F32";
    }
    const uint64_t manifest = std::filesystem::file_size(job.out_dir / "manifest.json");
    files.push_back({.name = "manifest.json", .bytes = manifest});
    return files;
}

} // namespace shardscope::convert
