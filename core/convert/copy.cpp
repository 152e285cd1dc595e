// Creating output files and streaming tensors into them (internal/job.h).

#include "core/convert/internal/cast.h"
#include "core/convert/internal/job.h"
#include "core/inspect/internal/dequantize.h"
#include "core/inspect/internal/tensor_reader.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace shardscope::convert {

namespace {
constexpr uint64_t kKernelCopyMin = 1u << 20; // bytes
} // namespace

OutputFile::OutputFile(const ConvertJob& job, std::string name)
    : m_job(job), m_name(std::move(name)), m_display((job.out_dir / m_name).string())
{
    m_fd = fsutil::create_exclusive(job.out_fd, m_name);
    if (!m_fd)
        failed("cannot create it");
}

void OutputFile::failed(const std::string& what) const
{
    throw Error(ProblemKind::io_error, m_display + ": " + what + ": " + std::strerror(errno), m_name);
}

void OutputFile::write(const void* data, std::size_t size)
{
    if (!fsutil::write_all(m_fd.get(), data, size))
        failed("write failed at byte " + std::to_string(m_written));
    if (m_job.options.durable)
        fsutil::start_writeback(m_fd.get(), m_written, size);
    m_written += size;
}

bool OutputFile::append_from(int fd, uint64_t offset, uint64_t size)
{
    if (!fsutil::append_from_file(m_fd.get(), fd, offset, size)) {
        // errno 0: the source ended early, which the caller's read through memory names (file,
        // rank, tensor). Anything else failed writing here, or reading the source as the kernel
        // copied: the output is no good either way, and the error is not hidden by a retry.
        if (errno != 0)
            failed("cannot copy " + std::to_string(size) + " bytes into it at byte " + std::to_string(m_written));
        if (::lseek(m_fd.get(), static_cast<off_t>(m_written), SEEK_SET) < 0)
            failed("cannot seek back to byte " + std::to_string(m_written));
        return false;
    }
    if (m_job.options.durable)
        fsutil::start_writeback(m_fd.get(), m_written, size);
    m_written += size;
    return true;
}

void OutputFile::patch(uint64_t offset, const void* data, std::size_t size)
{
    const auto* bytes = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::pwrite(m_fd.get(), bytes, size, static_cast<off_t>(offset));
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            failed("write failed at byte " + std::to_string(offset));
        }
        bytes += n;
        offset += static_cast<uint64_t>(n);
        size -= static_cast<std::size_t>(n);
    }
}

void OutputFile::finish()
{
    if (m_job.options.durable)
        fsutil::fsync_or_throw(m_fd.get(), m_display);
}

uint64_t output_bytes(const ConvertJob& job, std::size_t i)
{
    const TensorContent& t = job.source.tensors[job.picked[i]];
    uint64_t numel = 1;
    for (const uint64_t d : t.shape)
        numel *= d; // the reader refuses shapes whose count overflows before anything is written
    return numel * element_size(job.out_types[i]);
}

void copy_elements(ConvertJob& job, const TensorContent& tensor, ElementType to, uint64_t first, uint64_t count,
                   const std::function<void(const std::byte*, std::size_t)>& sink, OutputFile* file)
{
    inspect::TensorReader reader(*job.source.folder, tensor);
    const std::size_t in_size = element_size(tensor.type), out_size = element_size(to);
    const uint64_t piece = std::min<uint64_t>(count, kConvertPiece);
    // A block-quantized FP8 weight (paired only when it is cast) is written as its values: each
    // stored element times its block's scale, as stats and diff read it, then rounded once.
    const bool dequantize = tensor.scale >= 0;
    const bool as_stored = tensor.type == to && !dequantize;
    std::vector<std::byte> in(static_cast<std::size_t>(piece) * in_size);
    std::vector<std::byte> out(as_stored ? 0 : static_cast<std::size_t>(piece) * out_size);
    std::vector<double> values(dequantize ? static_cast<std::size_t>(piece) : 0);
    for (uint64_t done = 0; done < count;) {
        if (job.options.cancel && job.options.cancel->load(std::memory_order_relaxed))
            throw Error(ProblemKind::cancelled, job.out_dir.string() + ": conversion cancelled");
        auto n = static_cast<std::size_t>(std::min(piece, count - done));
        bool copied = false;
        // File to file only for runs long enough to pay for the system calls: a chunk split by
        // columns is a run per row.
        if (file && as_stored)
            if (const auto run = reader.local_run(first + done, n); run && run->count * in_size >= kKernelCopyMin) {
                n = static_cast<std::size_t>(run->count);
                copied = file->append_from(run->fd, run->offset, n * in_size);
            }
        if (!copied) {
            if (auto problem = reader.read(first + done, n, in.data()))
                throw Error(*problem);
            if (as_stored) {
                sink(in.data(), n * in_size);
            } else if (dequantize) {
                decode_elements(tensor.type, in.data(), n, values.data());
                inspect::dequantize_row_major(tensor, first + done, values.data(), n);
                encode_elements(values.data(), n, to, out.data());
                sink(out.data(), n * out_size);
            } else {
                cast_elements(tensor.type, in.data(), n, to, out.data());
                sink(out.data(), n * out_size);
            }
        }
        done += n;
        job.copied += n * out_size;
        if (job.progress)
            job.progress(job.copied);
    }
}

void copy_tensor(ConvertJob& job, std::size_t i, const std::function<void(const std::byte*, std::size_t)>& sink,
                 OutputFile* file)
{
    const TensorContent& tensor = job.source.tensors[job.picked[i]];
    const inspect::TensorReader sized(*job.source.folder, tensor);
    copy_elements(job, tensor, job.out_types[i], 0, sized.numel(), sink, file);
}

} // namespace shardscope::convert
