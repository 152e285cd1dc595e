#pragma once
// Small checkpoint files the inspect suites (tst_content, tst_diff) write: safetensors files and
// torch.save archives of given values.

#include "core/checkpoint/safetensors.h"
#include "foreign_fixtures.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

void write_safetensors(const std::filesystem::path& file,
                       const std::vector<std::pair<shardscope::SafetensorsTensor, std::string>>& tensors)
{
    std::vector<shardscope::SafetensorsTensor> layout;
    std::string data;
    for (auto [t, bytes] : tensors) {
        t.begin = data.size();
        t.end = t.begin + bytes.size();
        data += bytes;
        layout.push_back(t);
    }
    std::ofstream(file, std::ios::binary) << shardscope::make_safetensors_header(layout, {}) << data;
}

template <class T>
std::string bytes_of(const std::vector<T>& values)
{
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// torch.save({name: tensor}) of one float32 tensor over a storage of `values`, as torch writes it:
// 1-D and contiguous unless a shape and strides are given (a transpose is shape {c, r}, stride {1, c}).
std::string float_archive(const std::string& prefix, const std::string& name, const std::vector<float>& values,
                          std::vector<uint64_t> shape = {}, std::vector<int64_t> stride = {1})
{
    if (shape.empty())
        shape = {values.size()};
    fixtures::PickleWriter p;
    p.proto(2);
    p.global("collections", "OrderedDict").op(')').op('R');
    p.mark();
    p.str(name);
    fixtures::pickle_tensor_view(p, "0", "FloatStorage", int64_t(values.size()), 0, shape, stride);
    p.op('u').stop();
    fixtures::ZipWriter zip;
    zip.add(prefix + "/data.pkl", p.out, p.out);
    zip.add(prefix + "/data/0", bytes_of(values), bytes_of(values));
    zip.add(prefix + "/version", "3\n", "3\n");
    return zip.finish();
}

} // namespace
