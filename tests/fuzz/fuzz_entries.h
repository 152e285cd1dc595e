#pragma once
// The fuzzing entry points, shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp, clang with
// -fsanitize=fuzzer) and by tst_fuzz_regression, which replays every corpus and regression file
// through the same functions in the ordinary g++ build. Each one feeds untrusted bytes to one
// parser and checks what a parser that accepted them promises; shardscope::Error is the only
// acceptable way to refuse. Anything else (another exception, a failed invariant) is a finding:
// it escapes (std::logic_error) so libFuzzer reports it as a crash and the replay test fails.

#include "core/util/error.h"
#include "core/checkpoint/manifest.h"
#include "core/pipeline/cluster.h"
#include "core/pipeline/model_shape.h"
#include "core/pipeline/profile.h"
#include "core/pipeline/schedule_csv.h"
#include "core/pipeline/simulator.h"
#include "core/checkpoint/safetensors.h"
#include "core/foreign/dcp_hf.h"
#include "core/foreign/safetensors_listing.h"
#include "core/storage/internal/s3_answers.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <unistd.h>

namespace shardscope::fuzz {

inline void require(bool condition, const char* what)
{
    if (!condition)
        throw std::logic_error(std::string("fuzz invariant violated: ") + what);
}

// An error sentence quotes at most a few bounded names from the input.
inline constexpr std::size_t kMaxMessageBytes = 8192;

inline std::string_view as_text(const uint8_t* data, std::size_t size)
{
    return {reinterpret_cast<const char*>(data), size};
}

// manifest.json: parse, run every invariant check, and round-trip what was accepted.
inline void manifest_one(const uint8_t* data, std::size_t size)
{
    Manifest m;
    try {
        m = parse_manifest(as_text(data, size), "fuzz/manifest.json");
    } catch (const Error& e) {
        require(std::strlen(e.what()) <= kMaxMessageBytes, "error sentences stay short");
        return;
    }
    require(m.world_size >= 1 && m.world_size <= kMaxWorldSize, "world_size within limits");
    require(m.shards.size() <= static_cast<std::size_t>(kMaxWorldSize), "shard count within limit");
    require(m.param_numel_total <= kMaxNumel, "param_numel_total within limit");
    for (const auto& s : m.shards)
        require(s.param_shard_offset <= kMaxNumel && s.param_shard_numel <= kMaxNumel, "shard range within limit");
    for (const auto& problem : check_manifest(m, -1, "fuzz/manifest.json"))
        require(problem.message.size() <= kMaxMessageBytes &&
                    problem.message.find_first_of("\n\r\x1b") == std::string::npos,
                "problem sentences are short, one line, without terminal escapes");
    (void)check_manifest(m, 1, "fuzz/manifest.json");
    // Whatever was accepted must be written back in a form that is accepted again, unchanged.
    const std::string text = serialize_manifest(m);
    Manifest again;
    try {
        again = parse_manifest(text, "fuzz/manifest.json (rewritten)");
    } catch (const Error& e) {
        throw std::logic_error(std::string("a serialized manifest does not parse again: ") + e.what());
    }
    require(again.world_size == m.world_size && again.shards.size() == m.shards.size() &&
                again.param_numel_total == m.param_numel_total && again.step == m.step,
            "manifest round trip");
}

// A whole safetensors file: the bytes go into an in-memory file so the real reader (8-byte
// length, limits, pread) runs, not a copy of its logic.
inline void safetensors_one(const uint8_t* data, std::size_t size)
{
    const int fd = ::memfd_create("fuzz-safetensors", MFD_CLOEXEC);
    require(fd >= 0, "memfd_create");
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    std::size_t at = 0;
    while (at < size) {
        const ssize_t n = ::write(fd, data + at, size - at);
        require(n > 0, "write to memfd");
        at += static_cast<std::size_t>(n);
    }
    // The streaming listing (core/foreign, for big checkpoints) must agree with this reader exactly.
    std::string listing_error;
    SafetensorsListing listing;
    try {
        listing = read_safetensors_listing(storage::FileReader(fd), size, "fuzz/rank0.safetensors", 0);
    } catch (const Error& e) {
        listing_error = e.what();
    }
    SafetensorsHeader header;
    try {
        header = read_safetensors_header(storage::FileReader(fd), size, "fuzz/rank0.safetensors", 0);
    } catch (const Error& e) {
        require(std::strlen(e.what()) <= kMaxMessageBytes, "error sentences stay short");
        require(listing_error == e.what(), "the streaming listing fails with the same sentence");
        return;
    }
    require(listing_error.empty() && listing.tensors.size() == header.tensors.size(), "the listing agrees");
    for (std::size_t i = 0; i < header.tensors.size(); ++i)
        require(listing.name(listing.tensors[i]) == header.tensors[i].name &&
                    listing.tensors[i].begin == header.tensors[i].begin &&
                    listing.dtype(listing.tensors[i]) == header.tensors[i].dtype,
                "the listing lists the same tensors");
    require(header.data_start() <= size, "header inside the file");
    uint64_t expected = 0;
    for (const auto& t : header.tensors) {
        require(t.begin == expected && t.end >= t.begin, "tensors tile the data");
        expected = t.end;
        uint64_t bytes = *safetensors_dtype_size(t.dtype);
        for (uint64_t dim : t.shape)
            require(!__builtin_mul_overflow(bytes, dim, &bytes), "shape x dtype size does not overflow");
        require(bytes == t.bytes(), "shape x dtype size equals the byte range");
    }
    require(expected == size - header.data_start(), "tensors end at the end of the file");

    // As one of torch's per-rank Hugging Face shards: DCP_SHARDING_INFO places each entry, or the
    // file is refused in one sentence.
    std::vector<Problem> problems;
    const DcpMetadata meta = assemble_dcp_hf(
        {{.file = "shard-00001-model-00001-of-00001.safetensors", .listing = listing}}, "fuzz", problems);
    for (const auto& p : problems)
        require(p.message.size() <= kMaxMessageBytes, "error sentences stay short");
    require(problems.empty() ? meta.tensors.size() == header.tensors.size() : meta.tensors.empty(),
            "a shard is taken whole or not at all");
    for (const auto& t : meta.tensors)
        for (const auto& c : meta.chunks_of(t))
            for (std::size_t d = 0; d < t.size.size(); ++d)
                require(meta.offsets(c)[d] + meta.sizes(c)[d] <= t.size[d], "every chunk inside its tensor");

    // The same shard saved by two ranks: every chunk of a tensor with elements overlaps its copy,
    // and the sentence names the second rank's file and the tensor (the layout has no .metadata).
    if (!problems.empty())
        return;
    const DcpMetadata twice =
        assemble_dcp_hf({{.file = "shard-00001-model-00001-of-00001.safetensors", .listing = listing},
                         {.file = "shard-00002-model-00001-of-00001.safetensors", .listing = listing}},
                        "fuzz", problems);
    require(problems.empty() && twice.tensors.size() == meta.tensors.size(), "a shard agrees with its copy");
    for (const auto& t : twice.tensors) {
        std::vector<Problem> tiling;
        check_dcp_tiling(twice, t, {.described = "fuzz", .from_headers = true}, tiling);
        require(tiling.size() <= 1, "one sentence per tensor");
        const auto sizes = twice.sizes(twice.chunks_of(t)[0]);
        if (std::find(sizes.begin(), sizes.end(), uint64_t(0)) != sizes.end())
            continue; // a chunk without elements overlaps nothing

        require(tiling.size() == 1 && tiling[0].kind == ProblemKind::layout_overlap, "a copied chunk overlaps");
        require(tiling[0].path == "shard-00002-model-00001-of-00001.safetensors" &&
                    tiling[0].message.find("'" + t.fqn + "'") != std::string::npos &&
                    tiling[0].message.size() <= kMaxMessageBytes,
                "the overlap names the file and the tensor");
    }
}

// A layer profile; the first byte picks CSV (odd) or JSON (even), the rest is the text.
// A config.json and a cluster file are JSON objects too: the profile corpus feeds their readers,
// and a config they accept must give a profile that passes validate_profile (or be refused for
// its size or its heads, as invalid_argument), never anything else.
inline void model_shape_one(std::string_view text)
{
    try {
        (void)pipeline::parse_cluster(text, "fuzz-cluster.json");
    } catch (const Error& e) {
        require(std::strlen(e.what()) <= kMaxMessageBytes, "error sentences stay short");
    }
    pipeline::ModelConfig config;
    try {
        config = pipeline::parse_model_config(text, "fuzz-config.json");
    } catch (const Error& e) {
        require(std::strlen(e.what()) <= kMaxMessageBytes, "error sentences stay short");
        return;
    }
    if (config.layers > 256) // a deep model is the same arithmetic, only slower to fuzz
        return;
    try {
        const pipeline::ModelProfile m = pipeline::shape_profile(config, {.seq_len = 64, .micro_batch_size = 2}, {});
        require(m.total_params >= m.active_params && m.active_params > 0, "active parameters within the total");
    } catch (const Error& e) {
        require(e.kind() == ProblemKind::invalid_argument, "a config's profile is refused only as invalid_argument");
    }
}

inline void profile_one(const uint8_t* data, std::size_t size)
{
    if (size == 0)
        return;
    const bool csv = data[0] & 1;
    const std::string_view text = as_text(data + 1, size - 1);
    if (!csv)
        model_shape_one(text);
    pipeline::Profile profile;
    try {
        profile = csv ? pipeline::parse_profile_csv(text, "fuzz.csv") : pipeline::parse_profile_json(text, "fuzz.json");
    } catch (const Error&) {
        return;
    }
    require(!profile.layers.empty(), "an accepted profile has layers");
    try {
        pipeline::validate_profile(profile);
    } catch (const Error& e) {
        throw std::logic_error(std::string("a loaded profile fails validate_profile: ") + e.what());
    }
}

// A torch.distributed.pipelining CSV schedule: an accepted one writes back to a CSV that reads as
// the same op lists, and (when small) simulates or reports a deadlock, never anything else.
inline void schedule_csv_one(const uint8_t* data, std::size_t size)
{
    const std::string_view text = as_text(data, size);
    pipeline::Schedule schedule;
    try {
        schedule = pipeline::parse_schedule_csv(text, "fuzz.csv");
    } catch (const Error& e) {
        require(std::strlen(e.what()) <= kMaxMessageBytes, "a bounded error message");
        return;
    }
    const pipeline::Schedule again = pipeline::parse_schedule_csv(pipeline::schedule_csv(schedule), "again.csv");
    require(again.stage_ops == schedule.stage_ops && again.split_backward == schedule.split_backward,
            "an accepted schedule survives its own export");
    const long long ops = 3LL * schedule.spec.stages * schedule.spec.virtual_stages * schedule.spec.microbatches;
    if (ops > (1 << 16))
        return;
    const int pieces = schedule.spec.stages * schedule.spec.virtual_stages;
    std::vector<int> boundaries;
    for (int p = 1; p < pieces; ++p)
        boundaries.push_back(p);
    try {
        pipeline::make_plan(pipeline::uniform_profile(pieces), schedule, boundaries);
    } catch (const Error& e) {
        require(e.kind() == ProblemKind::deadlock, "a well-formed schedule either runs or deadlocks");
    }
}

// A hostile S3 server's answer body, as a listing page, a page of open uploads and an error: what
// is accepted lies beneath the prefix by plain names, a truncated page says where to go on, and
// every sentence is one bounded line without terminal escapes.
inline void s3_answer_one(const uint8_t* data, std::size_t size)
{
    const std::string body(as_text(data, size));
    const std::string prefix = "run/";
    const auto one_line = [](const std::string& text) {
        require(text.size() <= kMaxMessageBytes && text.find_first_of("\n\r\x1b") == std::string::npos,
                "a bounded one-line sentence without terminal escapes");
    };
    try {
        const storage::ListingPage page =
            storage::read_listing_page(body, prefix, "LIST s3://fuzz/run/", "s3://fuzz/run/");
        for (const storage::ObjectInfo& o : page.objects) {
            require(o.key.starts_with(prefix), "a listed key lies beneath the prefix");
            const std::string rest = "/" + o.key.substr(prefix.size()) + "/";
            require(rest.find("/../") == std::string::npos && rest.find("/./") == std::string::npos,
                    "a listed key has no . or .. component");
        }
        for (const std::string& folder : page.prefixes) {
            require(folder.starts_with(prefix) && folder.ends_with('/') && folder.size() > prefix.size(),
                    "a listed folder lies beneath the prefix and ends in /");
            const std::string rest = "/" + folder.substr(prefix.size());
            require(rest.find("//") == std::string::npos && rest.find("/../") == std::string::npos &&
                        rest.find("/./") == std::string::npos,
                    "a listed folder has no empty, . or .. component");
        }
        require(!page.truncated || !page.next_token.empty(), "a truncated listing says where it goes on");
    } catch (const Error& e) {
        one_line(e.what());
    }
    try {
        for (const storage::MultipartUpload& u :
             storage::read_uploads_page(body, prefix, "LIST uploads", "s3://fuzz/run/").uploads)
            require(u.key.starts_with(prefix) && !u.upload_id.empty(), "an upload beneath the prefix, with an id");
    } catch (const Error& e) {
        one_line(e.what());
    }
    one_line(storage::server_said(503, body));
}

} // namespace shardscope::fuzz
