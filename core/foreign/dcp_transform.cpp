#include "core/foreign/dcp_transform.h"

#include "core/util/error.h"

#include <memory>
#include <zstd.h>

namespace shardscope {

namespace {

constexpr uint32_t kZstdMagic = 0xFD2FB528;

uint64_t le(const unsigned char* p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i)
        v = (v << 8) | p[i];
    return v;
}

// The least a zstd frame decompresses to, from its block headers alone (RFC 8878, 3.1.1.2): raw
// and RLE blocks give their size exactly, compressed blocks at least nothing. Lets a frame that
// writes more than its header declares be named as such: libzstd only says "corruption".
uint64_t frame_floor(const unsigned char* frame, std::size_t size)
{
    if (size < 5)
        return 0;
    const unsigned char fhd = frame[4];
    const int fcs_code = fhd >> 6;
    const bool single = fhd & 0x20;
    const int dict_bytes[4] = {0, 1, 2, 4};
    const int fcs_bytes[4] = {single ? 1 : 0, 2, 4, 8};
    std::size_t at = 5 + (single ? 0 : 1) + std::size_t(dict_bytes[fhd & 3]) + std::size_t(fcs_bytes[fcs_code]);
    uint64_t floor = 0;
    while (at + 3 <= size) {
        const uint32_t header = uint32_t(le(frame + at, 3));
        const bool last = header & 1;
        const int type = (header >> 1) & 3;
        const uint32_t block = header >> 3;
        at += 3;
        if (type == 0 || type == 1)
            floor += block;
        at += type == 1 ? 1 : block; // RLE stores one byte
        if (last || type == 3)
            break;
    }
    return floor;
}

struct DctxFree {
    void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

} // namespace

bool dcp_transform_known(std::string_view transform)
{
    // ZStandard.from_descriptor accepts any version whose major part is 1.
    if (!transform.starts_with("stream.zstd/"))
        return false;
    const std::string_view version = transform.substr(12);
    return version == "1" || version.starts_with("1.");
}

uint64_t dcp_inflated_limit(uint64_t element_bytes)
{
    return element_bytes ? element_bytes + kDcpArchiveOverhead : kMaxDcpInflatedItem;
}

std::vector<std::byte> inflate_dcp_zstd(const ZipReadAt& read, uint64_t offset, uint64_t length, uint64_t max_bytes,
                                        const std::string& shown)
{
    auto bad = [&](const std::string& what) -> Error {
        return Error(ProblemKind::invalid_archive, shown + ": " + what);
    };
    // The compressed bytes are at most what they decompress to (or the range is refused below),
    // and never more than the limit's worth is held: a larger range is not this item's.
    if (length > max_bytes + kDcpArchiveOverhead)
        throw bad("its " + std::to_string(length) + " zstd-compressed bytes are more than the " +
                  std::to_string(max_bytes) + " the item can take");
    std::vector<unsigned char> in(length);
    if (length && !read(in.data(), length, offset))
        throw bad("cannot read its " + std::to_string(length) + " bytes at offset " + std::to_string(offset));
    std::unique_ptr<ZSTD_DCtx, DctxFree> dctx(ZSTD_createDCtx());
    if (!dctx)
        throw bad("cannot start a zstd decoder (out of memory)");
    std::vector<std::byte> out;
    std::size_t at = 0;
    if (length == 0)
        throw bad("holds no zstd frame (0 bytes)");
    while (at < in.size()) {
        const unsigned char* frame = in.data() + at;
        const std::size_t left = in.size() - at;
        if (left < 4 || le(frame, 4) != kZstdMagic)
            throw bad(at == 0 ? "is not zstd-compressed (no zstd frame magic at its start) though its "
                                "transform_descriptors say stream.zstd"
                              : "has " + std::to_string(left) + " bytes after its last zstd frame that are not one");
        const std::size_t frame_size = ZSTD_findFrameCompressedSize(frame, left);
        if (ZSTD_isError(frame_size))
            throw bad(std::string("its zstd frame at byte ") + std::to_string(at) + " is cut or corrupt (" +
                      ZSTD_getErrorName(frame_size) + ")");
        const unsigned long long declared = ZSTD_getFrameContentSize(frame, frame_size);
        const bool has_declared = declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR;
        if (has_declared && frame_floor(frame, frame_size) > declared)
            throw bad("its zstd frame at byte " + std::to_string(at) + " expands past the " + std::to_string(declared) +
                      " bytes its header declares");
        if (has_declared && (declared > max_bytes || out.size() > max_bytes - declared))
            throw bad("its zstd frame at byte " + std::to_string(at) + " declares " + std::to_string(declared) +
                      " bytes, past the " + std::to_string(max_bytes) + " the item can take");
        ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_only);
        ZSTD_inBuffer input{frame, frame_size, 0};
        const std::size_t frame_start = out.size();
        std::size_t ret = 1;
        while (ret != 0) {
            if (out.size() - frame_start >= (std::size_t(1) << 62) || out.size() > max_bytes)
                break;
            const std::size_t room = std::max<std::size_t>(ZSTD_DStreamOutSize(), out.size() / 2);
            const std::size_t used = out.size();
            out.resize(std::min<uint64_t>(used + room, max_bytes + 1));
            if (out.size() == used) // at the limit and the frame wants more
                break;
            ZSTD_outBuffer output{out.data() + used, out.size() - used, 0};
            ret = ZSTD_decompressStream(dctx.get(), &output, &input);
            out.resize(used + output.pos);
            if (ZSTD_isError(ret))
                throw bad(std::string("its zstd frame at byte ") + std::to_string(at) + " is corrupt (" +
                          ZSTD_getErrorName(ret) + ")");
            if (ret != 0 && input.pos == input.size && output.pos < output.size)
                throw bad(std::string("its zstd frame at byte ") + std::to_string(at) + " is cut short");
        }
        if (out.size() > max_bytes)
            throw bad("it decompresses past the " + std::to_string(max_bytes) + " bytes the item can take");
        at += frame_size;
    }
    return out;
}

} // namespace shardscope
