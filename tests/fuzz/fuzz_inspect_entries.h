#pragma once
// Fuzzing entry point for the tensor-content readers, stats and diff (see fuzz_entries.h for the
// contract): the input becomes a checkpoint on disk, since these read files through descriptors
// confined to the folder. Its first byte says which:
//   0: a .safetensors file (the rest of the input);
//   1: a torch.save archive, model.pt (the rest);
//   2: a DCP folder: 4 bytes little-endian L, then L bytes of .metadata, then __0_0.distcp;
//   3: torch's Hugging Face storage per rank: sharded/shard-00001-model-00001-of-00001.safetensors
//      (the rest), its chunks placed by DCP_SHARDING_INFO, FP8 weights paired with their scales;
//   4: a DeepSpeed ZeRO step of one rank: 4 bytes little-endian L, then L bytes of
//      mp_rank_00_model_states.pt, then zero_pp_rank_0_mp_rank_00_optim_states.pt (the model put
//      together from param_shapes and the flat partitions);
//   5: a Megatron iteration of two ranks: 4 bytes little-endian L, then L bytes of the first
//      rank's model_optim_rng.pt, then the second's; tensor-parallel ranks mp_rank_00 and
//      mp_rank_01 (their slices joined by Megatron's layer rules) when the first byte is 5 modulo
//      12, pipeline stages mp_rank_00_000 and mp_rank_00_001 (layers numbered across them) else.
// verify_checkpoint, inspect_content and diff_checkpoints of the checkpoint against itself must end
// in a report or a typed Error; and a checkpoint compared with itself differs nowhere it could be read.

#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/open/verify.h"
#include "fuzz_entries.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <stdlib.h>

namespace shardscope::fuzz {

// One scratch folder per process, emptied for every input.
inline std::filesystem::path inspect_scratch()
{
    static const std::filesystem::path dir = [] {
        std::string pattern = (std::filesystem::temp_directory_path() / "shardscope-fuzz-inspect-XXXXXX").string();
        require(::mkdtemp(pattern.data()) != nullptr, "a scratch folder");
        return std::filesystem::path(pattern);
    }();
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        std::filesystem::remove_all(entry.path());
    return dir;
}

inline void write_bytes(const std::filesystem::path& file, const uint8_t* data, std::size_t size)
{
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

inline void inspect_one(const uint8_t* data, std::size_t size)
{
    if (size < 1)
        return;
    const std::filesystem::path dir = inspect_scratch();
    std::filesystem::path target;
    switch (data[0] % 6) {
    case 0:
        target = dir / "model.safetensors";
        write_bytes(target, data + 1, size - 1);
        break;
    case 1:
        target = dir / "model.pt";
        write_bytes(target, data + 1, size - 1);
        break;
    case 3:
        target = dir / "step";
        std::filesystem::create_directories(target / "sharded");
        write_bytes(target / "sharded" / "shard-00001-model-00001-of-00001.safetensors", data + 1, size - 1);
        break;
    default: {
        if (size < 5)
            return;
        uint32_t length = 0;
        std::memcpy(&length, data + 1, 4);
        const std::size_t first = std::min<std::size_t>(length, size - 5);
        std::array<std::filesystem::path, 2> files;
        if (data[0] % 6 == 5) {
            target = dir / "iter_0000001";
            const bool stages = data[0] % 12 != 5;
            for (int r = 0; r < 2; ++r) {
                const std::string folder =
                    stages ? "mp_rank_00_00" + std::to_string(r) : "mp_rank_0" + std::to_string(r);
                std::filesystem::create_directories(target / folder);
                files[r] = target / folder / "model_optim_rng.pt";
            }
        } else {
            const bool deepspeed = data[0] % 6 == 4;
            target = dir / (deepspeed ? "global_step1" : "dcp");
            std::filesystem::create_directory(target);
            files = {target / (deepspeed ? "mp_rank_00_model_states.pt" : ".metadata"),
                     target / (deepspeed ? "zero_pp_rank_0_mp_rank_00_optim_states.pt" : "__0_0.distcp")};
        }
        write_bytes(files[0], data + 5, first);
        write_bytes(files[1], data + 5 + first, size - 5 - first);
    }
    }
    // verify first (its FP8 partner check over the listed tensors included): a report, or a typed
    // Error, whose sentences name what they are about and stay short.
    try {
        VerifyOptions verify;
        verify.threads = 1;
        const VerifyReport report = verify_checkpoint(target, verify);
        for (const Problem& p : report.problems)
            require(p.message.size() <= kMaxMessageBytes && !p.message.empty(), "bounded verify sentences");
    } catch (const Error&) {
    }
    ContentOptions options;
    options.threads = 1;
    try {
        const ContentReport report = inspect_content(target, options);
        for (const TensorContent& t : report.tensors) {
            require(t.part_stats.size() == t.parts.size(), "statistics for every part");
            uint64_t parts = 0;
            for (const ValueStats& s : t.part_stats)
                parts += s.numel;
            require(t.stats.numel == parts, "a tensor's figures are its parts' together");
            for (const Problem& p : report.problems)
                require(p.message.size() <= kMaxMessageBytes, "bounded messages");
        }
    } catch (const Error&) {
    }
    DiffOptions same;
    same.threads = 1;
    try {
        const DiffReport diff = diff_checkpoints(target, target, same);
        for (const TensorDiff& t : diff.tensors)
            require(t.status == DiffStatus::identical || t.status == DiffStatus::unreadable,
                    "a checkpoint compared with itself differs nowhere it could be read");
    } catch (const Error&) {
    }
}

} // namespace shardscope::fuzz
