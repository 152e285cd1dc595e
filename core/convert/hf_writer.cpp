// --to hf: model-0000I-of-0000N.safetensors files of at most --max-shard-size tensor bytes each
// (a larger tensor gets a file of its own, as transformers does) and model.safetensors.index.json.

#include "core/checkpoint/safetensors.h"
#include "core/convert/internal/job.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace shardscope::convert {

namespace {

std::string shard_name(std::size_t index, std::size_t count)
{
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
    return name;
}

// Output tensors split into files in order, each file filled until the next tensor would take it
// past `max_bytes`.
std::vector<std::vector<std::size_t>> group_into_files(const ConvertJob& job)
{
    std::vector<std::vector<std::size_t>> files;
    uint64_t in_file = 0;
    for (std::size_t i = 0; i < job.picked.size(); ++i) {
        const uint64_t bytes = output_bytes(job, i);
        if (files.empty() || (in_file > 0 && in_file + bytes > job.options.max_shard_bytes)) {
            files.emplace_back();
            in_file = 0;
        }
        files.back().push_back(i);
        in_file += bytes;
    }
    if (files.empty()) // a checkpoint without tensors still gets a (valid, empty) file
        files.emplace_back();
    return files;
}

} // namespace

std::vector<ConvertedFile> write_hf(ConvertJob& job)
{
    const auto groups = group_into_files(job);
    std::vector<ConvertedFile> written;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    uint64_t total = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const std::string name = shard_name(g, groups.size());
        std::vector<SafetensorsTensor> header;
        uint64_t at = 0;
        for (const std::size_t i : groups[g]) {
            const uint64_t bytes = output_bytes(job, i);
            header.push_back({.name = job.tensors[i].name,
                              .dtype = job.tensors[i].dtype_out,
                              .shape = job.tensors[i].shape,
                              .begin = at,
                              .end = at + bytes});
            at += bytes;
            job.tensors[i].file = name;
            weight_map[job.tensors[i].name] = name;
        }
        total += at;
        OutputFile file(job, name);
        const std::string head = make_safetensors_header(header, {{"format", "pt"}});
        file.write(head.data(), head.size());
        for (const std::size_t i : groups[g])
            copy_tensor(
                job, i, [&](const std::byte* data, std::size_t n) { file.write(data, n); }, &file);
        file.finish();
        written.push_back({.name = name, .bytes = file.size()});
    }
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    const std::string text = index.dump(2) + "\n";
    OutputFile file(job, "model.safetensors.index.json");
    file.write(text.data(), text.size());
    file.finish();
    written.push_back({.name = file.name(), .bytes = file.size()});
    return written;
}

} // namespace shardscope::convert
