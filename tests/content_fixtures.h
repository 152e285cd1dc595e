#pragma once
// Small checkpoint files the inspect suites (tst_content, tst_diff) write: safetensors files and
// torch.save archives of given values.

#include "core/checkpoint/safetensors.h"
#include "foreign_fixtures.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

void write_safetensors(const std::filesystem::path& file,
                       const std::vector<std::pair<shardscope::SafetensorsTensor, std::string>>& tensors)
{
    std::vector<shardscope::SafetensorsTensor> layout;
    std::string data;
    for (auto [t, bytes] : tensors) {
        t.begin = data.size();
        t.end = t.begin + bytes.size();
        data += bytes;
        layout.push_back(t);
    }
    std::ofstream(file, std::ios::binary) << shardscope::make_safetensors_header(layout, {}) << data;
}

template <class T>
std::string bytes_of(const std::vector<T>& values)
{
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// torch.save({name: tensor}) of one float32 tensor over a storage of `values`, as torch writes it:
// 1-D and contiguous unless a shape and strides are given (a transpose is shape {c, r}, stride {1, c}).
std::string float_archive(const std::string& prefix, const std::string& name, const std::vector<float>& values,
                          std::vector<uint64_t> shape = {}, std::vector<int64_t> stride = {1})
{
    if (shape.empty())
        shape = {values.size()};
    fixtures::PickleWriter p;
    p.proto(2);
    p.global("collections", "OrderedDict").op(')').op('R');
    p.mark();
    p.str(name);
    fixtures::pickle_tensor_view(p, "0", "FloatStorage", int64_t(values.size()), 0, shape, stride);
    p.op('u').stop();
    fixtures::ZipWriter zip;
    zip.add(prefix + "/data.pkl", p.out, p.out);
    zip.add(prefix + "/data/0", bytes_of(values), bytes_of(values));
    zip.add(prefix + "/version", "3\n", "3\n");
    return zip.finish();
}

// A torch DCP checkpoint of one float32 tensor `fqn` holding `values`, stored as the chunk's raw
// bytes in __0_0.distcp (a range DCP reads as the chunk itself).
inline void write_dcp_checkpoint(const std::filesystem::path& dir, const std::string& fqn,
                                 const std::vector<float>& values)
{
    const uint64_t n = values.size();
    const std::vector<fixtures::DcpTensorSpec> tensors = {
        {.fqn = fqn, .size = {n}, .chunks = {{.offsets = {0}, .sizes = {n}, .file = "__0_0.distcp", .length = n * 4}}}};
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
    fixtures::write_file(dir / "__0_0.distcp", bytes_of(values));
}

// A DeepSpeed global_step folder: the model file and one ZeRO rank's optimizer file, whose
// exp_avg_sq holds `exp_avg_sq`.
inline void write_deepspeed_step(const std::filesystem::path& dir, const std::vector<float>& exp_avg_sq)
{
    fixtures::write_file(dir / "mp_rank_00_model_states.pt",
                         float_archive("mp_rank_00_model_states", "module.w", {1, 2, 3, 4}));
    const std::string optimizer = "zero_pp_rank_0_mp_rank_00_optim_states";
    fixtures::write_file(dir / (optimizer + ".pt"),
                         float_archive(optimizer, "optimizer_state_dict.exp_avg_sq", exp_avg_sq));
}

// A Megatron iteration folder of one tensor-parallel rank: mp_rank_00/model_optim_rng.pt holding
// one tensor of `values`.
inline void write_megatron_iteration(const std::filesystem::path& dir, const std::vector<float>& values)
{
    fixtures::write_file(dir / "mp_rank_00" / "model_optim_rng.pt",
                         float_archive("model_optim_rng", "model.language_model.embedding.weight", values));
}

} // namespace
