#pragma once
// A Megatron-LM root saved with --ckpt-format torch_dist, laid out as Megatron writes it: a DCP
// folder whose Metadata carries mcore_data, with metadata.json, common.pt and integrity.json beside
// it (integrity.json's digests from Qt's SHA-256, not the code under test). For the core's and the
// command line's tests.

#include "foreign_fixtures.h"

#include <QCryptographicHash>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fixtures {

inline std::string read_file(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

inline std::string sha256_of(const std::string& bytes)
{
    return QCryptographicHash::hash(QByteArray(bytes.data(), qsizetype(bytes.size())), QCryptographicHash::Sha256)
        .toHex()
        .toStdString();
}

// {key: {}} for one tensor, {key: {"nd_reformulated_orig_global_shape": (4, 6)}} for a flattened one,
// as MCoreSavePlanner.create_global_plan sets metadata.mcore_data.
inline void mcore_data(PickleWriter& w)
{
    w.str("mcore_data").op('}').memoize().mark();
    w.str("model.bias").op('}').memoize();
    w.str("optimizer.state.exp_avg.model.weight").op('}').memoize().mark();
    w.str("nd_reformulated_orig_global_shape").mark().integer(4).integer(6).op('t').memoize();
    w.op('u');
    w.op('u');
}

// model.weight [4, 6] split by rows over two ranks (raw float32 chunks: values 0..23 / 4), model.bias
// [6] on rank 0.
inline std::vector<float> weight_values()
{
    std::vector<float> v(24);
    for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = float(i) / 4.0f;
    return v;
}

inline std::string floats(const std::vector<float>& values, std::size_t from, std::size_t count)
{
    std::string out(count * 4, '\0');
    std::memcpy(out.data(), values.data() + from, count * 4);
    return out;
}

// Writes integrity.json as save_integrity_manifest does: every file of the folder but itself.
inline void write_integrity(const fs::path& iter, const std::vector<std::string>& skip = {})
{
    std::string files;
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(iter))
        if (entry.is_regular_file() && entry.path().filename() != "integrity.json")
            names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
        if (std::find(skip.begin(), skip.end(), name) != skip.end())
            continue;
        files += std::string(files.empty() ? "" : ",\n") + "    \"" + name + "\": \"" +
            sha256_of(read_file(iter / name)) + "\"";
    }
    write_file(iter / "integrity.json", "{\n  \"algorithm\": \"sha256\",\n  \"files\": {\n" + files + "\n  }\n}");
}

// A Megatron root: latest_checkpointed_iteration.txt -> iter_0000120/ saved with --ckpt-format
// torch_dist. Returns the iteration folder.
inline fs::path write_torch_dist(const fs::path& root, float scale = 1.0f)
{
    write_file(root / "latest_checkpointed_iteration.txt", "120");
    const fs::path iter = root / "iter_0000120";
    std::vector<float> w = weight_values();
    for (auto& x : w)
        x *= scale;
    const std::vector<float> bias = {1, 2, 3, 4, 5, 6};
    std::vector<DcpTensorSpec> tensors = {
        {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp", 0, 48}, {{2, 0}, {2, 6}, "__1_0.distcp", 0, 48}}},
        {"model.bias", {6}, {{{0}, {6}, "__0_0.distcp", 48, 24}}},
    };
    write_file(iter / "__0_0.distcp", floats(w, 0, 12) + floats(bias, 0, 6));
    write_file(iter / "__1_0.distcp", floats(w, 12, 12));
    write_file(iter / ".metadata", dcp_metadata(tensors, true, {}, {}, true, mcore_data));
    write_file(iter / "metadata.json",
               R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1, )"
               R"("common_backend": "torch", "common_backend_version": 1})");
    write_file(iter / "common.pt", torch_archive("common", {{"rng_state.cuda", {5}}}));
    write_integrity(iter);
    return iter;
}

} // namespace fixtures
