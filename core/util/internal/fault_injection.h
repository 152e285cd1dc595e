#pragma once
// Fault injection, for tests only (apps never include core/*/internal/): every write, fsync and
// rename the core performs goes through fsutil's write_all, fsync_or_throw and rename_at, which
// count them. inject_fault(op, k, err) makes the k-th such operation from now on (1-based) fail
// with errno `err`; k = 0 disarms it.

namespace shardscope::fsutil {

enum class IoOp { write, fsync, rename };
void inject_fault(IoOp op, int k, int error);
int io_operations(IoOp op); // operations counted since the last inject_fault or reset_io_counts
void reset_io_counts();

} // namespace shardscope::fsutil
