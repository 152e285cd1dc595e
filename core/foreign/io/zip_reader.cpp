#include "core/foreign/io/zip_reader.h"

#include "core/util/error.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <zlib.h>

namespace shardscope {

namespace {

constexpr uint32_t kEocdSignature = 0x06054b50;
constexpr uint32_t kZip64EocdSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr std::size_t kEocdSize = 22;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kZip64EocdSize = 56;
constexpr std::size_t kCentralSize = 46;
constexpr std::size_t kLocalSize = 30;
constexpr std::size_t kChunk = 4u << 20;

uint64_t get(const unsigned char* p, std::size_t n)
{
    uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
        v |= uint64_t(p[i]) << (8 * i);
    return v;
}

[[noreturn]] void bad(const std::string& path, const std::string& what)
{
    throw Error(ProblemKind::invalid_archive, path + ": not a valid zip archive: " + what, path);
}

void read_or_throw(const ZipReadAt& read, void* buffer, std::size_t size, uint64_t offset, const std::string& path)
{
    if (!read(buffer, size, offset))
        throw Error(ProblemKind::unreadable,
                    path + ": read of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                        " failed",
                    path);
}

bool add_ok(uint64_t a, uint64_t b, uint64_t& out)
{
    return !__builtin_add_overflow(a, b, &out);
}

} // namespace

ZipReadAt zip_read_memory(std::string_view data)
{
    return [data](void* buffer, std::size_t size, uint64_t offset) {
        if (offset > data.size() || size > data.size() - offset)
            return false;
        if (size > 0) // an empty central directory reads 0 bytes into no buffer at all
            std::memcpy(buffer, data.data() + offset, size);
        return true;
    };
}

ZipDirectory read_zip_directory(const ZipReadAt& read, uint64_t file_size, const std::string& path)
{
    if (file_size < kEocdSize)
        bad(path, "the file is " + std::to_string(file_size) + " bytes, too short for an end-of-directory record");
    // The EOCD record sits at the end, followed only by a comment of at most 65535 bytes.
    const uint64_t tail_size = std::min<uint64_t>(file_size, kEocdSize + 0xffff);
    std::vector<unsigned char> tail(static_cast<std::size_t>(tail_size));
    read_or_throw(read, tail.data(), tail.size(), file_size - tail_size, path);
    std::size_t eocd = std::string::npos;
    for (std::size_t i = tail.size() - kEocdSize + 1; i-- > 0;) {
        if (get(&tail[i], 4) == kEocdSignature && i + kEocdSize + get(&tail[i + 20], 2) == tail.size()) {
            eocd = i;
            break;
        }
    }
    if (eocd == std::string::npos)
        bad(path, "no end-of-central-directory record (truncated, or not a zip file)");
    const uint64_t eocd_offset = file_size - tail_size + eocd;
    const unsigned char* e = &tail[eocd];
    ZipDirectory dir;
    uint64_t entries = get(e + 10, 2);
    if (get(e + 4, 2) != 0 || get(e + 6, 2) != 0 || get(e + 8, 2) != entries)
        bad(path, "multi-disk (spanned) archives are not supported");
    dir.central_directory_size = get(e + 12, 4);
    dir.central_directory_offset = get(e + 16, 4);

    if (entries == 0xffff || dir.central_directory_size == 0xffffffff || dir.central_directory_offset == 0xffffffff) {
        if (eocd_offset < kZip64LocatorSize)
            bad(path, "zip64 sizes are flagged but there is no zip64 locator");
        unsigned char loc[kZip64LocatorSize];
        read_or_throw(read, loc, sizeof loc, eocd_offset - kZip64LocatorSize, path);
        if (get(loc, 4) != kZip64LocatorSignature)
            bad(path, "zip64 sizes are flagged but there is no zip64 locator");
        const uint64_t z64 = get(loc + 8, 8);
        if (z64 > eocd_offset || eocd_offset - z64 < kZip64EocdSize)
            bad(path, "the zip64 end record offset " + std::to_string(z64) + " is outside the file");
        unsigned char rec[kZip64EocdSize];
        read_or_throw(read, rec, sizeof rec, z64, path);
        if (get(rec, 4) != kZip64EocdSignature)
            bad(path, "the zip64 end record has a bad signature");
        entries = get(rec + 32, 8);
        if (get(rec + 24, 8) != entries)
            bad(path, "multi-disk (spanned) archives are not supported");
        dir.central_directory_size = get(rec + 40, 8);
        dir.central_directory_offset = get(rec + 48, 8);
        dir.zip64 = true;
    }
    if (entries > kMaxZipEntries)
        bad(path, std::to_string(entries) + " entries exceed the limit of " + std::to_string(kMaxZipEntries));
    if (dir.central_directory_size > kMaxZipCentralDirectory)
        bad(path, "a central directory of " + std::to_string(dir.central_directory_size) + " bytes exceeds the limit");
    uint64_t cd_end = 0;
    if (!add_ok(dir.central_directory_offset, dir.central_directory_size, cd_end) || cd_end > eocd_offset)
        bad(path,
            "the central directory [" + std::to_string(dir.central_directory_offset) + ", +" +
                std::to_string(dir.central_directory_size) + ") runs past the end records (truncated?)");
    if (entries * kCentralSize > dir.central_directory_size)
        bad(path,
            std::to_string(entries) + " entries cannot fit in a " + std::to_string(dir.central_directory_size) +
                "-byte central directory");

    std::vector<unsigned char> cd(static_cast<std::size_t>(dir.central_directory_size));
    read_or_throw(read, cd.data(), cd.size(), dir.central_directory_offset, path);
    std::size_t pos = 0;
    dir.entries.reserve(static_cast<std::size_t>(entries));
    for (uint64_t i = 0; i < entries; ++i) {
        if (cd.size() - pos < kCentralSize || get(&cd[pos], 4) != kCentralSignature)
            bad(path, "central directory record " + std::to_string(i) + " is missing or has a bad signature");
        const unsigned char* c = &cd[pos];
        ZipEntry entry;
        entry.flags = static_cast<uint16_t>(get(c + 8, 2));
        entry.method = static_cast<uint16_t>(get(c + 10, 2));
        entry.crc32 = static_cast<uint32_t>(get(c + 16, 4));
        entry.compressed_size = get(c + 20, 4);
        entry.uncompressed_size = get(c + 24, 4);
        const std::size_t name_len = get(c + 28, 2), extra_len = get(c + 30, 2), comment_len = get(c + 32, 2);
        entry.local_header_offset = get(c + 42, 4);
        if (cd.size() - pos - kCentralSize < name_len + extra_len + comment_len)
            bad(path, "central directory record " + std::to_string(i) + " runs past the directory's end");
        entry.name.assign(reinterpret_cast<const char*>(c + kCentralSize), name_len);
        // zip64 extended information: only the fields whose 32-bit value is saturated, in order.
        const unsigned char* x = c + kCentralSize + name_len;
        for (std::size_t xp = 0; xp + 4 <= extra_len;) {
            const uint64_t id = get(x + xp, 2), size = get(x + xp + 2, 2);
            if (xp + 4 + size > extra_len)
                bad(path, "entry '" + entry.name + "' has a malformed extra field");
            if (id == 0x0001) {
                std::size_t f = xp + 4;
                auto take = [&](uint64_t& field) {
                    if (field != 0xffffffff)
                        return;
                    if (f + 8 > xp + 4 + size)
                        bad(path, "entry '" + entry.name + "' has a short zip64 extra field");
                    field = get(x + f, 8);
                    f += 8;
                };
                take(entry.uncompressed_size);
                take(entry.compressed_size);
                take(entry.local_header_offset);
            }
            xp += 4 + size;
        }
        uint64_t end = 0;
        if (!add_ok(entry.local_header_offset, kLocalSize + name_len, end) ||
            !add_ok(end, entry.compressed_size, end) || end > dir.central_directory_offset)
            bad(path,
                "entry '" + entry.name + "' (local header at " + std::to_string(entry.local_header_offset) + ", " +
                    std::to_string(entry.compressed_size) +
                    " bytes) runs into the central directory "
                    "or past the end of the file (truncated?)");
        dir.entries.push_back(std::move(entry));
        pos += kCentralSize + name_len + extra_len + comment_len;
    }

    // Entries may not share bytes: sorted by offset, each must start after the previous data.
    std::vector<const ZipEntry*> order;
    for (const auto& entry : dir.entries)
        order.push_back(&entry);
    std::sort(order.begin(), order.end(),
              [](const ZipEntry* a, const ZipEntry* b) { return a->local_header_offset < b->local_header_offset; });
    for (std::size_t i = 1; i < order.size(); ++i) {
        const ZipEntry& prev = *order[i - 1];
        if (prev.local_header_offset + kLocalSize + prev.compressed_size > order[i]->local_header_offset)
            bad(path, "entries '" + prev.name + "' and '" + order[i]->name + "' overlap");
    }
    return dir;
}

ZipDirectory parse_zip_directory(std::string_view file, const std::string& display_path)
{
    return read_zip_directory(zip_read_memory(file), file.size(), display_path);
}

ZipEntryCheck locate_zip_entry(const ZipReadAt& read, const ZipDirectory& directory, const ZipEntry& entry)
{
    ZipEntryCheck out;
    unsigned char local[kLocalSize];
    if (!read(local, sizeof local, entry.local_header_offset)) {
        out.problem = "cannot read the local header of '" + entry.name + "'";
        return out;
    }
    if (get(local, 4) != kLocalSignature) {
        out.problem = "entry '" + entry.name + "' has a bad local header signature at byte " +
            std::to_string(entry.local_header_offset);
        return out;
    }
    const uint64_t name_len = get(local + 26, 2), extra_len = get(local + 28, 2);
    out.data_offset = entry.local_header_offset + kLocalSize + name_len + extra_len;
    if (out.data_offset > directory.central_directory_offset ||
        directory.central_directory_offset - out.data_offset < entry.compressed_size) {
        out.problem = "the data of entry '" + entry.name + "' runs into the central directory";
        return out;
    }
    // A stored entry is its own bytes: a larger uncompressed size would make a reader that takes
    // the data as is run past the entry into its neighbours.
    if (entry.method == 0 && entry.uncompressed_size != entry.compressed_size) {
        out.problem = "stored entry '" + entry.name + "' records " + std::to_string(entry.uncompressed_size) +
            " bytes but holds " + std::to_string(entry.compressed_size);
        return out;
    }
    std::string name(name_len, '\0');
    if (!read(name.data(), name.size(), entry.local_header_offset + kLocalSize) || name != entry.name) {
        out.problem = "the local header of '" + entry.name + "' names '" + name + "'";
        return out;
    }
    if (entry.flags & 1u) {
        out.problem = "entry '" + entry.name + "' is encrypted";
        return out;
    }
    if (entry.method != 0 && entry.method != 8) {
        out.problem = "entry '" + entry.name + "' uses compression method " + std::to_string(entry.method) +
            " (only stored and deflated are supported)";
        return out;
    }
    out.ok = true;
    return out;
}

namespace {

// Streams the entry's data through `sink` (uncompressed bytes), computing CRC and size.
ZipEntryCheck stream_entry(const ZipReadAt& read, const ZipDirectory& directory, std::size_t index,
                           const std::atomic<bool>* cancel, const std::function<void(uint64_t)>& progress,
                           const std::function<bool(const unsigned char*, std::size_t)>& sink)
{
    const ZipEntry& entry = directory.entries.at(index);
    ZipEntryCheck out = locate_zip_entry(read, directory, entry);
    if (!out.ok)
        return out;
    out.ok = false;
    // Buffers as large as the entry needs, up to kChunk, and not zero-filled: a DCP file holds one
    // small archive per chunk, and zeroing two 4 MiB buffers per entry would dominate its check.
    const auto in_size = static_cast<std::size_t>(std::clamp<uint64_t>(entry.compressed_size, 1, kChunk));
    const auto out_size = static_cast<std::size_t>(std::clamp<uint64_t>(entry.uncompressed_size, 64u << 10, kChunk));
    auto in = std::make_unique_for_overwrite<unsigned char[]>(in_size);
    std::unique_ptr<unsigned char[]> inflated;
    z_stream z{};
    const bool deflated = entry.method == 8;
    if (deflated) {
        inflated = std::make_unique_for_overwrite<unsigned char[]>(out_size);
        if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
            out.problem = "zlib could not start inflating '" + entry.name + "'";
            return out;
        }
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t done = 0, produced = 0;
    bool stream_end = false;
    std::string failure;
    while (done < entry.compressed_size && failure.empty()) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            failure = "cancelled";
            break;
        }
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(in_size, entry.compressed_size - done));
        if (!read(in.get(), n, out.data_offset + done)) {
            failure = "read failed in entry '" + entry.name + "' at byte " + std::to_string(done);
            break;
        }
        done += n;
        if (!deflated) {
            crc = crc32(crc, in.get(), static_cast<uInt>(n));
            produced += n;
            if (sink && !sink(in.get(), n))
                failure = "entry '" + entry.name + "' is larger than allowed";
        } else {
            z.next_in = in.get();
            z.avail_in = static_cast<uInt>(n);
            while (z.avail_in > 0 && !stream_end && failure.empty()) {
                z.next_out = inflated.get();
                z.avail_out = static_cast<uInt>(out_size);
                const int rc = inflate(&z, Z_NO_FLUSH);
                if (rc != Z_OK && rc != Z_STREAM_END) {
                    failure =
                        "the deflated data of '" + entry.name + "' is corrupt (" + (z.msg ? z.msg : "zlib error") + ")";
                    break;
                }
                const std::size_t got = out_size - z.avail_out;
                crc = crc32(crc, inflated.get(), static_cast<uInt>(got));
                produced += got;
                if (sink && got && !sink(inflated.get(), got))
                    failure = "entry '" + entry.name + "' is larger than allowed";
                stream_end = rc == Z_STREAM_END;
            }
            if (stream_end && (z.avail_in > 0 || done < entry.compressed_size) && failure.empty())
                failure = "the deflated data of '" + entry.name + "' ends before its recorded compressed size";
        }
        if (progress)
            progress(done);
    }
    if (deflated) {
        // Drain output still pending after the last input (large expansions).
        while (failure.empty() && !stream_end && done == entry.compressed_size) {
            z.next_out = inflated.get();
            z.avail_out = static_cast<uInt>(out_size);
            const int rc = inflate(&z, Z_NO_FLUSH);
            const std::size_t got = out_size - z.avail_out;
            if (rc != Z_OK && rc != Z_STREAM_END) {
                failure = "the deflated data of '" + entry.name + "' is truncated or corrupt";
                break;
            }
            crc = crc32(crc, inflated.get(), static_cast<uInt>(got));
            produced += got;
            if (sink && got && !sink(inflated.get(), got))
                failure = "entry '" + entry.name + "' is larger than allowed";
            stream_end = rc == Z_STREAM_END;
            if (rc == Z_OK && got == 0)
                break;
        }
        inflateEnd(&z);
        if (failure.empty() && !stream_end)
            failure = "the deflated data of '" + entry.name + "' is truncated";
    }
    out.actual_crc32 = static_cast<uint32_t>(crc);
    out.actual_size = produced;
    if (!failure.empty()) {
        out.problem = failure;
        return out;
    }
    if (produced != entry.uncompressed_size) {
        out.crc_mismatch = true;
        out.problem = "entry '" + entry.name + "' holds " + std::to_string(produced) +
            " bytes but its directory "
            "record says " +
            std::to_string(entry.uncompressed_size);
        return out;
    }
    if (out.actual_crc32 != entry.crc32) {
        char text[96];
        std::snprintf(text, sizeof text, "CRC-32 %08x differs from the recorded %08x", out.actual_crc32, entry.crc32);
        out.crc_mismatch = true;
        out.problem = "entry '" + entry.name + "': " + text + " (the data is corrupt)";
        return out;
    }
    out.ok = true;
    return out;
}

} // namespace

ZipEntryCheck check_zip_entry(const ZipReadAt& read, uint64_t, const ZipDirectory& directory, std::size_t index,
                              const std::atomic<bool>* cancel, const std::function<void(uint64_t)>& progress)
{
    return stream_entry(read, directory, index, cancel, progress, {});
}

std::string read_zip_entry(const ZipReadAt& read, uint64_t, const ZipDirectory& directory, std::size_t index,
                           uint64_t max_bytes, const std::string& display_path)
{
    const ZipEntry& entry = directory.entries.at(index);
    if (entry.uncompressed_size > max_bytes)
        throw Error(ProblemKind::invalid_archive,
                    display_path + ": entry '" + entry.name + "' is " + std::to_string(entry.uncompressed_size) +
                        " bytes, more than the " + std::to_string(max_bytes) + "-byte limit",
                    display_path);
    std::string data;
    data.reserve(static_cast<std::size_t>(entry.uncompressed_size));
    const auto check = stream_entry(read, directory, index, nullptr, {}, [&](const unsigned char* p, std::size_t n) {
        if (data.size() + n > max_bytes)
            return false;
        data.append(reinterpret_cast<const char*>(p), n);
        return true;
    });
    if (!check.ok)
        throw Error(check.crc_mismatch ? ProblemKind::crc_mismatch : ProblemKind::invalid_archive,
                    display_path + ": " + check.problem, display_path);
    return data;
}

} // namespace shardscope
