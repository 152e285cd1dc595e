#pragma once
// A torch DCP whose items are compressed as FileSystemWriter(_extensions=[ZStandard()]) stores
// them (transform_descriptors "stream.zstd/1"), for the core's and the command line's tests.

#include "foreign_fixtures.h"

#include <functional>
#include <map>
#include <string>
#include <vector>
#include <zstd.h>

namespace fixtures {

// As zstandard's stream_writer writes it (torch's ZStandard.transform_to): no content size in
// the frame header.
inline std::string zstd_unsized(const std::string& bytes)
{
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
    std::string out(ZSTD_compressBound(bytes.size()), '\0');
    const std::size_t n = ZSTD_compress2(cctx, out.data(), out.size(), bytes.data(), bytes.size());
    ZSTD_freeCCtx(cctx);
    out.resize(ZSTD_isError(n) ? 0 : n);
    return out;
}

// model.weight [4, 6] over two ranks and model.bias [6], every chunk's torch.save archive
// compressed as FileSystemWriter does with _extensions=[ZStandard()]; `edit` may change the
// archives (before compression) or the compressed bytes of rank 1's weight chunk.
using Squeeze = std::function<std::string(const std::string& archive)>;
inline fs::path write_zstd_dcp(const fs::path& dir, const std::string& transform = "stream.zstd/1",
                               const Squeeze& weight1 = {})
{
    std::vector<DcpTensorSpec> tensors = {
        {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp"}, {{2, 0}, {2, 6}, "__1_0.distcp"}}},
        {"model.bias", {6}, {{{0}, {6}, "__0_0.distcp"}}},
    };
    std::map<std::string, std::string> files;
    for (auto& t : tensors)
        for (auto& c : t.chunks) {
            const std::string archive = torch_tensor_archive(c.sizes);
            const std::string stored =
                weight1 && &c == &tensors[0].chunks[1] ? weight1(archive) : zstd_unsized(archive);
            c.offset = files[c.file].size();
            c.length = stored.size();
            c.transform = transform;
            files[c.file] += stored;
        }
    write_file(dir / ".metadata", dcp_metadata(tensors));
    for (const auto& [name, content] : files)
        write_file(dir / name, content);
    return dir;
}

// The same tensors as write_zstd_dcp, every item stored as is (no extension).
inline fs::path write_plain_dcp(const fs::path& dir)
{
    std::vector<DcpTensorSpec> tensors = {
        {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp"}, {{2, 0}, {2, 6}, "__1_0.distcp"}}},
        {"model.bias", {6}, {{{0}, {6}, "__0_0.distcp"}}},
    };
    const auto files = dcp_layout(tensors);
    write_file(dir / ".metadata", dcp_metadata(tensors));
    for (const auto& [name, content] : files)
        write_file(dir / name, content);
    return dir;
}

} // namespace fixtures
