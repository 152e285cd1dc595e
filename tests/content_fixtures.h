#pragma once
// Small checkpoint files the inspect suites (tst_content, tst_diff) write: safetensors files and
// torch.save archives of given values.

#include "core/checkpoint/safetensors.h"
#include "foreign_fixtures.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

inline void write_safetensors(const std::filesystem::path& file,
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
inline std::string float_archive(const std::string& prefix, const std::string& name, const std::vector<float>& values,
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

// ---- FP8 weights with 128x128 block scales (DeepSeek-V3's *_scale_inv) -------------------------
// OCP E4M3 ("fn") decoded here from its definition, independently of core/inspect/elements.cpp:
// sign, 4 exponent bits with bias 7, 3 mantissa bits; exponent 0 is subnormal (m/8 * 2^-6);
// S.1111.111 is NaN; there are no infinities.
inline double e4m3_reference(uint8_t bits)
{
    const int sign = bits >> 7, exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
    if (exponent == 0xF && mantissa == 0x7)
        return std::numeric_limits<double>::quiet_NaN();
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa / 8.0, 1 - 7) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
    return sign ? -magnitude : magnitude;
}

// A block-quantized weight of shape [rows, cols]: random FP8 codes (no NaN except the one planted
// at `nan_at`, when given) and one F32 scale per 128x128 block, of magnitudes 2^-12 .. 2^3.
struct Fp8Weight {
    uint64_t rows = 0, cols = 0;
    std::string codes; // rows * cols bytes, row-major
    std::vector<float> scales; // [ceil(rows/128), ceil(cols/128)], row-major

    uint64_t scale_cols() const { return (cols + 127) / 128; }
    std::vector<uint64_t> scale_shape() const { return {(rows + 127) / 128, scale_cols()}; }
    // The float64 reference: every element decoded by e4m3_reference, times its block's scale
    // (or alone, `raw`).
    std::vector<double> values(bool raw = false) const
    {
        std::vector<double> out(codes.size());
        for (uint64_t r = 0; r < rows; ++r)
            for (uint64_t c = 0; c < cols; ++c) {
                const double stored = e4m3_reference(uint8_t(codes[r * cols + c]));
                out[r * cols + c] = raw ? stored : stored * double(scales[(r / 128) * scale_cols() + c / 128]);
            }
        return out;
    }
};

inline Fp8Weight make_fp8_weight(uint64_t rows, uint64_t cols, uint32_t seed, std::optional<uint64_t> nan_at = {})
{
    Fp8Weight w{.rows = rows, .cols = cols};
    std::mt19937 random(seed);
    w.codes.resize(rows * cols);
    for (char& code : w.codes) {
        uint8_t bits = uint8_t(random() & 0xFF);
        if ((bits & 0x7F) == 0x7F)
            bits ^= 0x01; // not NaN: the largest finite magnitude, 448
        code = char(bits);
    }
    if (nan_at)
        w.codes[*nan_at] = char(0xFF);
    const std::vector<uint64_t> shape = w.scale_shape();
    for (uint64_t i = 0; i < shape[0] * shape[1]; ++i)
        w.scales.push_back(std::ldexp(1.0f + float(random() % 1000) / 1000.0f, int(random() % 16) - 12));
    return w;
}

// The safetensors entries of `name` (F8_E4M3) and, unless `scale_dtype` is empty, its partner
// `name`_scale_inv of `scale_shape` (the right one when empty) stored as `scale_dtype`: F32 holds
// the scales, any other dtype zeros of its size.
inline std::vector<std::pair<shardscope::SafetensorsTensor, std::string>> fp8_entries(
    const std::string& name, const Fp8Weight& w, const std::string& scale_dtype = "F32",
    std::vector<uint64_t> scale_shape = {})
{
    std::vector<std::pair<shardscope::SafetensorsTensor, std::string>> out = {
        {{.name = name, .dtype = "F8_E4M3", .shape = {w.rows, w.cols}}, w.codes}};
    if (scale_dtype.empty())
        return out;
    if (scale_shape.empty())
        scale_shape = w.scale_shape();
    uint64_t numel = 1;
    for (uint64_t d : scale_shape)
        numel *= d;
    std::string bytes = scale_dtype == "F32" && numel == w.scales.size()
        ? bytes_of(w.scales)
        : std::string(numel *
                          (scale_dtype == "F32"                                ? 4
                               : scale_dtype == "BF16" || scale_dtype == "F16" ? 2
                                                                               : 1),
                      '\0');
    out.push_back({{.name = name + "_scale_inv", .dtype = scale_dtype, .shape = scale_shape}, bytes});
    return out;
}

} // namespace
