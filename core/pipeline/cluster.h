#pragma once
// The machine a plan is made for (shardctl schedule/plan/profile --cluster NAME|FILE): GPUs per
// node, the 16-bit matmul rate, HBM, and the two links. Presets are resources/clusters/*.json,
// compiled in; a user's file has the same keys (docs/shardctl.md section 4.1). Parsed over bytes
// like the other readers.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

inline constexpr std::uint64_t kMaxClusterBytes = 1ull << 20; // a cluster file read at most

struct Cluster {
    std::string name; // "name", else the file stem
    std::string source; // the file, or "preset"
    std::string description;
    std::vector<std::string> sources; // where the figures come from
    int gpus_per_node = 0;
    double peak_tflops = 0; // peak dense 16-bit (BF16/FP16) TFLOP/s of one GPU; 0: not given
    double matmul_fraction = 0.5; // the share of the peak a training step's matmuls reach
    std::optional<double> measured_tflops; // a measured rate per GPU, which replaces the two above
    double hbm_gib = 0; // memory per GPU, GiB
    double intra_node_gbytes_per_s = 0; // NVLink per GPU, GB/s (10^9 bytes) as datasheets state it
    double intra_node_latency_us = 0;
    double inter_node_gbits_per_s = 0; // InfiniBand/RoCE per GPU, Gbit/s
    double inter_node_latency_us = 0;

    // The TFLOP/s one GPU achieves: the measured rate, else peak x fraction.
    double achieved_tflops() const { return measured_tflops ? *measured_tflops : peak_tflops * matmul_fraction; }
};

// Parses a cluster file. Unknown keys, missing ones and values out of range throw
// Error(ProblemKind::invalid_argument) naming `origin` and the key, in one sentence.
Cluster parse_cluster(std::string_view text, const std::string& origin);

// The compiled-in presets by name ("a100-80gb", "h100-sxm-80gb", "h200-sxm-141gb").
std::vector<std::string> cluster_preset_names();
std::optional<Cluster> cluster_preset(std::string_view name);

// A preset's name, else a file's path (cannot_open when neither).
Cluster load_cluster(const std::string& name_or_path);

} // namespace shardscope::pipeline
