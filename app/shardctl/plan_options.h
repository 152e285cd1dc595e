#pragma once
// The training-step options `schedule` and `plan` share (docs/shardctl.md 2.8 and 2.12): one
// definition, so a plan candidate's options mean exactly the same to `schedule`.

#include "core/pipeline/training.h"

#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QList>
#include <optional>

namespace shardctl {

// --zero, --gpu-memory, --link-gbps, --p2p-latency, --overlap-allreduce (schedule adds --dp and
// a single --recompute; plan searches those).
QList<QCommandLineOption> training_options();

// Reads the options above into `options` and `latency_ms`; on a bad value prints the one
// sentence and returns false (the caller returns kUsage).
bool read_training_options(const QCommandLineParser& parser,
                           shardscope::pipeline::TrainingOptions& options, double& latency_ms);

// A finite number >= `min_value` ("--gpu-memory must be a number of GiB > 0, not 'x'"); prints
// and returns nullopt otherwise. `strict`: the value must be > min_value.
std::optional<double> number_option(const QCommandLineParser& parser, const QString& name,
                                    double min_value, bool strict, const char* unit);

} // namespace shardctl
