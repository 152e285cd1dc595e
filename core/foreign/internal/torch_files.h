#pragma once
// Shared by the DeepSpeed and Megatron verifiers (both are folders of torch.save archives):
// checking every archive of a report, and reading numbers out of their file names.

#include "core/checkpoint/verify.h"
#include "core/foreign/torch_archive.h"

#include <string>
#include <string_view>
#include <vector>

namespace shardscope::foreign {

// Runs the archive checks (CRC-32 of every entry unless `check_data` is false, the tensor listing
// from data.pkl) over report.shards and fills the summary's tensor list; `megatron`, when given,
// receives what each shard's file says of Megatron's args, and `zero_partitions` the data-parallel
// size each DeepSpeed ZeRO optimizer file says its state is split over (by shard index; unset or
// 0 where unread or not said).
void check_archives(const storage::Folder& folder, VerifyReport& report, const VerifyOptions& options,
                    ProblemKind missing_kind, bool check_data, std::vector<MegatronArgs>* megatron = nullptr,
                    std::vector<int64_t>* zero_partitions = nullptr);

// Digits at `pos` of `s` (advancing it), or -1.
int digits(std::string_view s, std::size_t& pos);
// Advances `pos` past `literal` when `s` has it there.
bool eat(std::string_view s, std::size_t& pos, std::string_view literal);

// "07": DeepSpeed and Megatron file names use at least two digits.
std::string two_digits(int v);

} // namespace shardscope::foreign
