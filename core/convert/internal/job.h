#pragma once
// Internal to core/convert: what a writer (hf_writer.cpp, dcp_writer.cpp) is handed — the
// source's tensors as laid out, the names and dtypes they get — and the two things every writer
// does: create a file in the temporary output folder and stream a tensor into it piece by piece.

#include "core/convert/convert.h"
#include "core/inspect/content.h"
#include "core/util/fsutil.h"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::convert {

struct ConvertJob {
    const ContentReport& source; // the tensors and their parts (no statistics)
    int out_fd = -1; // the temporary output folder
    std::filesystem::path out_dir; // its path, for messages
    const ConvertOptions& options;
    // One per output tensor, in output order: the index into source.tensors and what it becomes.
    std::vector<std::size_t> picked;
    std::vector<ConvertedTensor>& tensors; // writers fill `file`
    std::vector<ElementType> out_types;
    uint64_t copy_total = 0; // bytes to write, for progress
    uint64_t copied = 0;
    // The source's training step, where it records one (ShardScope, DeepSpeed, Megatron); a
    // DCP records none (then --to shardscope takes Adam's step count, or 0).
    std::optional<uint64_t> step;
    std::function<void(uint64_t copied)> progress;
};

// A file created in the output folder (O_EXCL, never through a symlink), written in order, with
// earlier bytes patchable (a zip's CRC once its entry is written). Every failure is an io_error
// naming the file.
class OutputFile {
public:
    OutputFile(const ConvertJob& job, std::string name);
    void write(const void* data, std::size_t size);
    void patch(uint64_t offset, const void* data, std::size_t size);
    // Appends `size` bytes of the local file `fd` from `offset`, file to file in the kernel. False
    // when the source ended early (the file is then as before): the caller reads them through
    // memory, which names the source file and tensor. Throws io_error for any other failure.
    bool append_from(int fd, uint64_t offset, uint64_t size);
    uint64_t size() const { return m_written; }
    const std::string& name() const { return m_name; }
    void finish(); // fsync when durable; the file stays open until destroyed

private:
    [[noreturn]] void failed(const std::string& what) const;
    const ConvertJob& m_job;
    std::string m_name, m_display;
    fsutil::UniqueFd m_fd;
    uint64_t m_written = 0;
};

// Streams output tensor `i` (job.picked[i]) in its output dtype to `sink`, kConvertPiece
// elements at a time, counting job.copied. Throws Error naming the source file and tensor when a
// part cannot be read, cancelled when the cancel flag is set. With `file` (the file `sink` writes
// to), elements stored as they are written, in a local file, are copied file to file instead.
void copy_tensor(ConvertJob& job, std::size_t i, const std::function<void(const std::byte*, std::size_t)>& sink,
                 OutputFile* file = nullptr);

// Elements [first, first + count) of `tensor` (row-major) as `to`, in pieces, to `sink` (or
// `file`, as copy_tensor).
void copy_elements(ConvertJob& job, const TensorContent& tensor, ElementType to, uint64_t first, uint64_t count,
                   const std::function<void(const std::byte*, std::size_t)>& sink, OutputFile* file = nullptr);

// Bytes of output tensor `i`.
uint64_t output_bytes(const ConvertJob& job, std::size_t i);

// Writes the job as a Hugging Face folder / a torch DCP folder / a ShardScope checkpoint; returns
// the files written.
std::vector<ConvertedFile> write_hf(ConvertJob& job);
std::vector<ConvertedFile> write_dcp(ConvertJob& job);
std::vector<ConvertedFile> write_shardscope(ConvertJob& job);

} // namespace shardscope::convert
