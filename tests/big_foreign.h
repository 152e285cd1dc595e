#pragma once
// Generators of the biggest foreign checkpoints, shared by bench_open, bench_gui and
// the widget tests that open them: made at run time, never committed.
//   write_index: a Hugging Face safetensors index of `tensors` small F16 tensors in `files` files,
//     named like a mixture-of-experts layer's;
//   write_dcp: a DCP checkpoint of `chunks` chunks, every tensor row-split over `ranks` ranks,
//     its .metadata pickled as CPython does (the memo, batches) or without the memo (the worst case);
//   write_deepspeed: a DeepSpeed ZeRO checkpoint of `files` torch.save archives (one model-states
//     file, the rest optimizer-state shards);
// and the peer the benchmarks compare opening the index with: Python's json.load of it plus
// reading every file's header, as a loader does.

#include "foreign_fixtures.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace bigforeign {

namespace fs = std::filesystem;

inline std::string index_tensor_name(std::size_t i)
{
    return "model.layers." + std::to_string(i / 2048) + ".mlp.experts." + std::to_string(i / 8 % 256) + ".w" +
        std::to_string(i % 8) + ".weight";
}

// A safetensors file of `count` tensors of shape [4, 8], the weight map's entries added.
inline std::string safetensors_file(std::size_t first, std::size_t count, nlohmann::json& weight_map,
                                    const std::string& file)
{
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (std::size_t i = first; i < first + count; ++i) {
        const std::string name = index_tensor_name(i);
        const std::size_t bytes = 2 * 4 * 8;
        header[name] = {{"dtype", "F16"}, {"shape", {4, 8}}, {"data_offsets", {data.size(), data.size() + bytes}}};
        data.append(bytes, '\0');
        weight_map[name] = file;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out;
    fixtures::put_le(out, text.size(), 8);
    return out + text + data;
}

inline void write_index(const fs::path& dir, std::size_t tensors, std::size_t files)
{
    fs::create_directories(dir);
    nlohmann::json weight_map = nlohmann::json::object();
    const std::size_t per_file = tensors / files;
    for (std::size_t f = 0; f < files; ++f) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1, files);
        fixtures::write_file(dir / name, safetensors_file(f * per_file, per_file, weight_map, name));
    }
    const nlohmann::json index = {{"metadata", {{"total_size", per_file * files * 64}}}, {"weight_map", weight_map}};
    fixtures::write_file(dir / "model.safetensors.index.json", index.dump(2));
}

inline void write_dcp(const fs::path& dir, std::size_t chunks, int ranks, bool like_cpython = true)
{
    fs::create_directories(dir);
    std::vector<fixtures::DcpTensorSpec> tensors;
    for (std::size_t t = 0; t * ranks < chunks; ++t) {
        fixtures::DcpTensorSpec spec{.fqn = "model.layers." + std::to_string(t / 16) + ".experts." +
                                         std::to_string(t % 16) + ".weight",
                                     .size = {uint64_t(ranks) * 2, 4}};
        for (int r = 0; r < ranks; ++r)
            spec.chunks.push_back(
                {.offsets = {uint64_t(r) * 2, 0}, .sizes = {2, 4}, .file = "__" + std::to_string(r) + "_0.distcp"});
        tensors.push_back(std::move(spec));
    }
    for (const auto& [file, bytes] : fixtures::dcp_layout(tensors))
        fixtures::write_file(dir / file, bytes);
    // As torch.save's pickler writes it (memo, batches): what a real job's .metadata looks like.
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors, true, {}, {}, like_cpython));
}

inline void write_deepspeed(const fs::path& dir, std::size_t files)
{
    fixtures::write_file(dir / "latest", "global_step1\n");
    const fs::path tag = dir / "global_step1";
    fixtures::write_file(
        tag / "mp_rank_00_model_states.pt",
        fixtures::torch_archive("mp_rank_00_model_states",
                                {{"module.embed.weight", {64, 16}}, {"module.head.weight", {16, 64}}}));
    for (std::size_t d = 0; d + 1 < files; ++d) {
        const std::string name = "bf16_zero_pp_rank_" + std::to_string(d) + "_mp_rank_00_optim_states";
        fixtures::write_file(tag / (name + ".pt"),
                             fixtures::torch_archive(name,
                                                     {{"optimizer_state_dict.fp32_flat", {64}},
                                                      {"optimizer_state_dict.exp_avg", {64}},
                                                      {"optimizer_state_dict.exp_avg_sq", {64}}}));
    }
}

// Python opening every archive of a DeepSpeed step as a loader would before unpickling: the zip
// directory and data.pkl's bytes (never unpickled).
inline constexpr const char* kPythonDeepSpeedPeer = R"(import os, sys, time, zipfile
d = os.path.join(sys.argv[1], "global_step1")
start = time.perf_counter()
for f in sorted(os.listdir(d)):
    with zipfile.ZipFile(os.path.join(d, f)) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        z.read(pkl)
print(time.perf_counter() - start)
)";

inline constexpr const char* kPythonIndexPeer = R"(import json, struct, sys, time, os
d = sys.argv[1]
start = time.perf_counter()
index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
for f in sorted(set(index["weight_map"].values())):
    with open(os.path.join(d, f), "rb") as h:
        n = struct.unpack("<Q", h.read(8))[0]
        json.loads(h.read(n))
print(time.perf_counter() - start)
)";

// Best of three runs of a Python peer (`source`, written to `script`) over `dir`, seconds.
inline double python_peer(const char* source, const fs::path& dir, const fs::path& script)
{
    fixtures::write_file(script, source);
    double best = 1e9;
    for (int round = 0; round < 3; ++round) {
        FILE* p = ::popen(("python3 '" + script.string() + "' '" + dir.string() + "'").c_str(), "r");
        double s = 0;
        if (p && std::fscanf(p, "%lf", &s) == 1)
            best = std::min(best, s);
        if (p)
            ::pclose(p);
    }
    return best;
}

inline double python_index_peer(const fs::path& dir, const fs::path& script)
{
    return python_peer(kPythonIndexPeer, dir, script);
}

} // namespace bigforeign
