#pragma once
// shardctl convert (docs/shardctl.md, "convert"): any checkpoint ShardScope reads, written again as
// a Hugging Face safetensors folder, a torch Distributed Checkpoint or a ShardScope checkpoint. The
// source is verified first and never modified; tensors are copied in pieces of kConvertPiece
// elements (never a whole tensor in memory), into a temporary folder beside the output that is
// verified, then renamed into place: a cancelled or failed conversion leaves no output.

#include "core/checkpoint/state.h"
#include "core/checkpoint/verify.h"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

enum class ConvertTarget { hf, dcp, shardscope };
enum class ConvertDtype { keep, bf16, f16, f32 };
enum class ConvertStates { model, model_optimizer };

std::string_view to_string(ConvertTarget target);
std::string_view to_string(ConvertDtype dtype);
std::string_view to_string(ConvertStates states);
std::optional<ConvertTarget> convert_target_from_string(std::string_view text);
std::optional<ConvertDtype> convert_dtype_from_string(std::string_view text);
std::optional<ConvertStates> convert_states_from_string(std::string_view text);

// "5GB", "500MB", "2GiB", "1048576" (bytes): decimal units are powers of 1000, binary (KiB, MiB,
// GiB, TiB) of 1024, as Hugging Face's max_shard_size. Nullopt for anything else, zero or overflow.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// Elements read and written per piece: 4 MiB of F32 in flight per tensor being copied.
inline constexpr uint64_t kConvertPiece = 1u << 20;

struct ConvertOptions {
    ConvertTarget target = ConvertTarget::hf;
    ConvertDtype dtype = ConvertDtype::keep;
    ConvertStates states = ConvertStates::model;
    uint64_t max_shard_bytes = 5'000'000'000; // hf: a file's tensor bytes (a larger tensor is alone)
    // shardscope: the ranks the flat vector is split over; dcp: the ranks each tensor's rows are
    // split over (one __R_0.distcp a rank); hf: must be 1.
    int world_size = 1;
    int threads = 0; // for verifying the source and the output
    bool durable = true; // fsync the files and the folder
    const std::atomic<bool>* cancel = nullptr;
    // Bytes so far of all three phases: verifying the source, copying, verifying the output.
    ProgressFn progress;
};

// One tensor as written: its name in the output and where it came from.
struct ConvertedTensor {
    std::string name; // in the output
    std::string source_name, source_state; // in the source ("" state for formats without states)
    bool model = true; // false: optimizer state (a ShardScope state other than param, or by name)
    std::string dtype_in, dtype_out;
    // An FP8 weight cast to --dtype: the `_scale_inv` tensor its values were multiplied by (that
    // tensor itself is not written); "" for every other tensor.
    std::string dequantized_by;
    std::vector<uint64_t> shape;
    std::string file; // the output file holding it; "" for an Adam step count not written (--to shardscope)
};

struct ConvertedFile {
    std::string name;
    uint64_t bytes = 0;
};

struct ConvertResult {
    std::filesystem::path source, out; // the source's step directory as read; the output folder
    std::string source_format;
    ConvertOptions options;
    std::vector<ConvertedTensor> tensors;
    std::vector<ConvertedFile> files; // the data files and the index or .metadata
    uint64_t tensor_bytes = 0; // written (after a cast)
    VerifyReport output_verify; // the output read back by its format's verifier
    double seconds = 0;
};

// Converts `source` into the new folder `out` (which must not exist or be an empty directory, and
// must not be inside the source). Throws Error: the source's first verification problem, a tensor
// that cannot be read or cast (naming the file and tensor), io_error writing, cancelled; `out` then
// does not exist (or is the empty directory it was).
ConvertResult convert_checkpoint(const storage::Location& source, const std::filesystem::path& out,
                                 const ConvertOptions& options);

// The convert --json object: ok, source {path, format}, out, to, dtype, states, max_shard_size (hf),
// world_size (dcp, shardscope), tensors, tensors_cast, fp8_dequantized, tensor_bytes, files, bytes,
// verified, seconds.
nlohmann::json convert_result_json(const ConvertResult& result);

} // namespace shardscope
