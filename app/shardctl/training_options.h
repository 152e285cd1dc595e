#pragma once
// The training-step options `schedule` and `plan` share (docs/shardctl.md 2.8 and 2.12): one
// definition, so a plan candidate's options mean exactly the same to `schedule`.

#include "core/pipeline/training.h"

#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QList>
#include <cstdint>
#include <optional>
#include <string>

namespace shardctl {

// --zero, --gpu-memory, --link-gbps, --p2p-latency, --overlap-allreduce, --fp32-grads (schedule adds --dp and
// a single --recompute; plan searches those).
QList<QCommandLineOption> training_options();

// Reads the options above into `options` and `latency_ms`; on a bad value prints the one
// sentence and returns false (the caller returns kUsage).
bool read_training_options(const QCommandLineParser& parser, shardscope::pipeline::TrainingOptions& options,
                           double& latency_ms);

// A finite number >= `min_value` and <= 1e15 ("--gpu-memory must be a number of GiB > 0, not
// 'x'"); prints and returns nullopt otherwise. `strict`: the value must be > min_value.
std::optional<double> number_option(const QCommandLineParser& parser, const QString& name, double min_value,
                                    bool strict, const char* unit);
// The same with an upper bound of `max_value`, named in the message.
std::optional<double> number_option(const QCommandLineParser& parser, const QString& name, double min_value,
                                    bool strict, double max_value, const char* unit);

// The sensible ranges: a GPU of 1 byte .. 1 PiB (2^20 GiB; llround of GiB x 2^30 is exact far
// beyond it), a link of 1 Mbit/s .. 1e15 Gbit/s (slower links make step times of years).
inline constexpr double kMaxGpuMemoryGib = 1048576.0;
inline constexpr double kMinLinkGbps = 1e-3;

// "1.5 GiB": the byte counts both commands print.
std::string bytes_text(std::int64_t bytes);

} // namespace shardctl
