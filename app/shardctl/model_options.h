#pragma once
// A model by its shape and a cluster, for schedule, plan and profile (docs/shardctl.md 2.8, 2.12,
// 2.14): --model CONFIG.json with --seq-len, --tp, --sp and --tflops, and --cluster NAME|FILE,
// read in one place so the three commands mean the same by them.

#include "core/pipeline/cluster.h"
#include "core/pipeline/parallel_cost.h"
#include "core/pipeline/profile_model.h"
#include "core/pipeline/training.h"

#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QList>
#include <optional>
#include <string>

namespace shardctl {

// --model, --tp, --sp, --cp, --ep, --tflops, --cluster; with `seq_len` also --seq-len (profile
// has its own). `searched` (plan): --tp, --cp and --ep fix what is otherwise searched, and there
// is no --sp (on wherever t > 1).
QList<QCommandLineOption> model_options(bool seq_len, bool searched = false);

struct ModelSource {
    std::string model_path; // --model, "" without it
    std::optional<shardscope::pipeline::Cluster> cluster;
    std::string cluster_argument; // --cluster as given: a preset's name or a file
    shardscope::pipeline::Workload work; // with --model: s, b and the rate
    shardscope::pipeline::Parallelism parallel;
};

// Reads the options above for a micro batch of `micro_batch` samples. The rate is --tflops, else
// the cluster's achieved rate, else 312 x 0.5 (an A100 at half its peak); with `keep_peak` (profile)
// a cluster's peak and fraction stay apart as device_tflops and mfu, else they are multiplied into
// device_tflops with mfu 1, so that plan's --tflops reproduces it exactly. On a bad value prints
// the one sentence and returns false; a cluster that cannot be read throws.
// `seq_len_for_model`: --seq-len is model_options' own (schedule, plan), so it needs --model.
bool read_model_source(const QCommandLineParser& parser, int micro_batch, bool keep_peak, bool seq_len_for_model,
                       ModelSource& out);

// The profile of --model (throws shardscope::Error for a bad config).
shardscope::pipeline::ModelProfile model_source_profile(const ModelSource& source);
shardscope::pipeline::ModelConfig model_source_config(const ModelSource& source);

// The cluster and, where given, --link-gbps and --p2p-latency: where every group's link comes from.
shardscope::pipeline::LinkChoice link_choice(const QCommandLineParser& parser, const ModelSource& source,
                                             const shardscope::pipeline::TrainingOptions& options, double latency_ms);

// schedule --model: the profile with the collectives of `mesh` (its tp, cp, ep are the source's),
// and the pipeline's and the data-parallel link of the rank layout set into `options` and
// `latency_ms` (parallel_cost.h), as plan --model computes them.
shardscope::pipeline::ModelProfile model_mesh_profile(const ModelSource& source,
                                                      const shardscope::pipeline::LinkChoice& choice,
                                                      const shardscope::pipeline::Mesh& mesh,
                                                      shardscope::pipeline::TrainingOptions& options,
                                                      double& latency_ms);

// What --cluster sets where --gpu-memory, --link-gbps or --p2p-latency are not given: HBM, the
// inter-node bandwidth per GPU and its latency (a pipeline's stages and its data-parallel
// replicas are on different nodes once tensor parallelism fills one).
void apply_cluster(const QCommandLineParser& parser, const ModelSource& source,
                   shardscope::pipeline::TrainingOptions& options, double& latency_ms);

} // namespace shardctl
