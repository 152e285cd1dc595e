#include "hostile_corpus.h"

#include "content_fixtures.h"
#include "foreign_fixtures.h"

#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "core/util/hashing.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace hostile {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kNumel = 1000;

std::string read_file(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_file(const fs::path& file, const std::string& bytes)
{
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out)
        throw std::runtime_error("cannot write " + file.string());
}

void must(bool ok, const std::string& what)
{
    if (!ok)
        throw std::runtime_error("hostile corpus: " + what + ": " + std::strerror(errno));
}

class Builder {
public:
    explicit Builder(const fs::path& root) : m_root(root)
    {
        m_corpus.root = root;
        m_corpus.outside = root / "outside";
        fs::create_directories(m_corpus.outside);
        fs::create_directories(root / "cases");
        // The pristine checkpoint every case starts from, kept in `outside` as a decoy too.
        m_pristine = m_corpus.outside / "pristine";
        const auto states = shardscope::make_demo_state(11, kNumel, kWorldSize, shardscope::ParamDtype::F16);
        shardscope::SaveOptions options;
        options.durable = false;
        shardscope::save_sharded(states, m_pristine, 5, options);
        // Byte-identical decoys: following a link to them would *succeed*, which the tests catch.
        fs::copy_file(m_pristine / "rank1.safetensors", m_corpus.outside / "secret.safetensors");
        fs::create_directories(m_corpus.outside / "dir");
        fs::copy_file(m_pristine / "rank1.safetensors", m_corpus.outside / "dir" / "rank1.safetensors");
        fs::copy_file(m_pristine / "manifest.json", m_corpus.outside / "manifest.json");
        write_file(m_corpus.outside / "latest-target", "step-1\n");
        must(::mkfifo((m_corpus.outside / "fifo").c_str(), 0644) == 0, "mkfifo outside");
    }

    Corpus take() { return std::move(m_corpus); }

    // A fresh copy of the pristine checkpoint as case `name`; `damage` edits it.
    Case& checkpoint(const std::string& name, const std::string& kind, const std::string& names,
                     const std::function<void(const fs::path&)>& damage)
    {
        const fs::path dir = m_root / "cases" / name;
        fs::copy(m_pristine, dir, fs::copy_options::recursive);
        damage(dir);
        m_corpus.cases.push_back({name, dir, kind, 1, 1, names, {}});
        return m_corpus.cases.back();
    }

    // A checkpoint root holding a good step-1 and whatever `build` adds (a `latest`, ...).
    Case& root(const std::string& name, const std::string& kind, const std::function<void(const fs::path&)>& build)
    {
        const fs::path dir = m_root / "cases" / name;
        fs::create_directories(dir);
        fs::copy(m_pristine, dir / "step-1", fs::copy_options::recursive);
        build(dir);
        m_corpus.cases.push_back({name, dir, kind, 1, 1, "latest", {}});
        return m_corpus.cases.back();
    }

    // A checkpoint whose manifest text is `text` (shard files stay in place).
    Case& manifest_text(const std::string& name, const std::string& kind, const std::string& text)
    {
        return checkpoint(name, kind, "manifest.json",
                          [&](const fs::path& dir) { write_file(dir / "manifest.json", text); });
    }

    // A checkpoint whose manifest is edited as JSON.
    Case& manifest_edit(const std::string& name, const std::string& kind, const std::function<void(json&)>& edit)
    {
        return checkpoint(name, kind, "manifest.json", [&](const fs::path& dir) {
            json m = json::parse(read_file(dir / "manifest.json"));
            edit(m);
            write_file(dir / "manifest.json", m.dump(1));
        });
    }

    const fs::path& outside() const { return m_corpus.outside; }
    std::string pristine_manifest() const { return read_file(m_pristine / "manifest.json"); }

private:
    fs::path m_root;
    fs::path m_pristine;
    Corpus m_corpus;
};

void write_header_length(const fs::path& shard, uint64_t length)
{
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.write(reinterpret_cast<const char*>(&length), 8);
}

} // namespace

Corpus make_corpus(const fs::path& root)
{
    Builder b(root);
    const fs::path out = b.outside();
    const bool root_user = ::geteuid() == 0;

    // ---- paths that leave the checkpoint
    b.manifest_edit("traversal", "path_outside_checkpoint",
                    [](json& m) { m["shards"][1]["path"] = "../../outside/secret.safetensors"; });
    b.manifest_edit("traversal_nested", "path_outside_checkpoint",
                    [](json& m) { m["shards"][1]["path"] = "sub/../../../outside/secret.safetensors"; });
    b.manifest_edit("absolute_path", "path_outside_checkpoint",
                    [&](json& m) { m["shards"][1]["path"] = (out / "secret.safetensors").string(); });
    b.manifest_edit("empty_path", "path_outside_checkpoint", [](json& m) { m["shards"][1]["path"] = ""; });
    b.manifest_edit("nul_in_path", "path_outside_checkpoint",
                    [](json& m) { m["shards"][1]["path"] = std::string("rank1.safetensors\0/../x", 23); });
    b.manifest_edit("dot_component", "path_outside_checkpoint",
                    [](json& m) { m["shards"][1]["path"] = "./rank1.safetensors"; });
    b.manifest_edit("path_5000_bytes", "path_outside_checkpoint",
                    [](json& m) { m["shards"][1]["path"] = std::string(5000, 'a'); });
    b.checkpoint("symlink_file_out", "path_outside_checkpoint", "rank1.safetensors", [&](const fs::path& dir) {
        fs::remove(dir / "rank1.safetensors");
        fs::create_symlink(out / "secret.safetensors", dir / "rank1.safetensors");
    });
    b.checkpoint("symlink_relative_out", "path_outside_checkpoint", "rank1.safetensors", [&](const fs::path& dir) {
        fs::remove(dir / "rank1.safetensors");
        fs::create_symlink("../../outside/secret.safetensors", dir / "rank1.safetensors");
    });
    b.checkpoint("symlink_dir_component", "path_outside_checkpoint", "manifest.json", [&](const fs::path& dir) {
         fs::create_directory_symlink(out / "dir", dir / "sub");
         json m = json::parse(read_file(dir / "manifest.json"));
         m["shards"][1]["path"] = "sub/rank1.safetensors";
         write_file(dir / "manifest.json", m.dump(1));
     }).names = "rank1.safetensors";
    b.checkpoint("symlink_inside", "path_outside_checkpoint", "rank1.safetensors", [](const fs::path& dir) {
        fs::rename(dir / "rank1.safetensors", dir / "real1.bin");
        fs::create_symlink("real1.bin", dir / "rank1.safetensors");
    });
    b.checkpoint("manifest_symlink_out", "path_outside_checkpoint", "manifest.json", [&](const fs::path& dir) {
        fs::remove(dir / "manifest.json");
        fs::create_symlink(out / "manifest.json", dir / "manifest.json");
    });
    b.checkpoint("shard_symlink_to_fifo", "path_outside_checkpoint", "rank1.safetensors", [&](const fs::path& dir) {
        fs::remove(dir / "rank1.safetensors");
        fs::create_symlink(out / "fifo", dir / "rank1.safetensors");
    });

    // ---- rank and layout invariants
    b.manifest_edit("duplicate_rank", "duplicate_rank", [](json& m) { m["shards"][1]["rank"] = 0; });
    b.manifest_edit("rank_out_of_range", "shard_count_mismatch", [](json& m) { m["shards"][3]["rank"] = 9; });
    b.manifest_edit("missing_entry", "shard_count_mismatch", [](json& m) { m["shards"].erase(2); });
    b.manifest_edit("overlapping_ranges", "layout_overlap", [](json& m) {
        m["shards"][1]["param_shard_offset"] = m["shards"][1]["param_shard_offset"].get<uint64_t>() - 10;
    });
    b.manifest_edit("gapped_ranges", "layout_gap", [](json& m) {
        m["shards"][2]["param_shard_offset"] = m["shards"][2]["param_shard_offset"].get<uint64_t>() + 10;
    });
    b.manifest_edit("numel_near_2^63", "invalid_manifest",
                    [](json& m) { m["shards"][1]["param_shard_numel"] = uint64_t(9223372036854775807ull); });
    b.manifest_edit("offset_2^64-1", "invalid_manifest",
                    [](json& m) { m["shards"][1]["param_shard_offset"] = uint64_t(18446744073709551615ull); });
    b.manifest_edit("bytes_2^63", "invalid_manifest", [](json& m) { m["shards"][0]["bytes"] = uint64_t(1) << 63; });
    b.manifest_edit("world_size_0", "invalid_manifest", [](json& m) { m["world_size"] = 0; });
    b.manifest_edit("world_size_2^31", "invalid_manifest", [](json& m) { m["world_size"] = uint64_t(1) << 31; });
    b.manifest_edit("world_size_negative", "invalid_manifest", [](json& m) { m["world_size"] = -4; });
    b.manifest_edit("schema_99", "unsupported_schema", [](json& m) { m["schema_version"] = 99; });
    b.manifest_edit("tensor_past_total", "invalid_manifest", [](json& m) {
        m["tensors"] = json::array({{{"name", "w"}, {"shape", {10}}, {"offset", 995}, {"numel", 10}}});
    });

    // ---- manifests built to exhaust memory or time
    {
        std::string text = R"({"schema_version":1,"world_size":1000000,"step":1,"shards":[)";
        text.reserve(text.size() + 3'000'000);
        for (int i = 0; i < 1'000'000; ++i)
            text += i ? ",{}" : "{}";
        text += "]}";
        b.manifest_text("million_shards", "invalid_manifest", text);
    }
    {
        std::string text = b.pristine_manifest();
        text.erase(text.rfind('}'));
        text += R"(,"deep":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
        b.manifest_text("deep_json", "invalid_manifest", text);
    }
    {
        std::string text = R"({"schema_version":1,"world_size":4,"step":1,"shards":[],"x":[)";
        for (int i = 0; i < 5'000'000; ++i)
            text += i ? ",0" : "0";
        text += "]}";
        b.manifest_text("five_million_values", "invalid_manifest", text);
    }
    b.checkpoint("manifest_over_64MiB", "invalid_manifest", "manifest.json", [](const fs::path& dir) {
        fs::resize_file(dir / "manifest.json", (64ull << 20) + 1); // sparse: costs no disk
    });
    b.checkpoint("manifest_truncated", "invalid_manifest", "manifest.json", [](const fs::path& dir) {
        fs::resize_file(dir / "manifest.json", fs::file_size(dir / "manifest.json") / 2);
    });
    b.manifest_text("manifest_empty", "invalid_manifest", "");
    b.manifest_text("manifest_binary", "invalid_manifest", std::string("\x00\xff\xfe{\"", 5));

    // ---- shard files
    b.checkpoint("header_length_2^63", "invalid_shard", "rank1.safetensors",
                 [](const fs::path& dir) { write_header_length(dir / "rank1.safetensors", uint64_t(1) << 63); });
    b.checkpoint("header_length_past_eof", "invalid_shard", "rank1.safetensors", [](const fs::path& dir) {
        write_header_length(dir / "rank1.safetensors", fs::file_size(dir / "rank1.safetensors"));
    });
    b.checkpoint("header_not_json", "invalid_shard", "rank1.safetensors", [](const fs::path& dir) {
        std::fstream f(dir / "rank1.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(8);
        f.write("\x01\x02\x03\x04garbage!", 12);
    });
    b.checkpoint("truncated_shard", "partial_write", "rank2.safetensors", [](const fs::path& dir) {
        fs::resize_file(dir / "rank2.safetensors", fs::file_size(dir / "rank2.safetensors") / 2);
    });
    b.checkpoint("shard_empty", "partial_write", "rank2.safetensors",
                 [](const fs::path& dir) { fs::resize_file(dir / "rank2.safetensors", 0); });
    b.checkpoint("shard_missing", "missing_shard", "rank3.safetensors",
                 [](const fs::path& dir) { fs::remove(dir / "rank3.safetensors"); });
    b.checkpoint("shard_is_directory", "unreadable", "rank1.safetensors", [](const fs::path& dir) {
        fs::remove(dir / "rank1.safetensors");
        fs::create_directory(dir / "rank1.safetensors");
    });
    b.checkpoint("shard_is_fifo", "unreadable", "rank1.safetensors", [](const fs::path& dir) {
        fs::remove(dir / "rank1.safetensors");
        must(::mkfifo((dir / "rank1.safetensors").c_str(), 0644) == 0, "mkfifo");
    });
    b.checkpoint("manifest_is_fifo", "unreadable", "manifest.json", [](const fs::path& dir) {
        fs::remove(dir / "manifest.json");
        must(::mkfifo((dir / "manifest.json").c_str(), 0644) == 0, "mkfifo");
    });
    b.checkpoint("manifest_is_directory", "unreadable", "manifest.json", [](const fs::path& dir) {
        fs::remove(dir / "manifest.json");
        fs::create_directory(dir / "manifest.json");
    });
    b.checkpoint("corrupt_byte", "hash_mismatch", "rank2.safetensors", [](const fs::path& dir) {
        std::fstream f(dir / "rank2.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-3, std::ios::end);
        f.write("\x7f", 1);
    });
    {
        Case& c = b.checkpoint("shard_unreadable", "unreadable", "rank1.safetensors", [](const fs::path& dir) {
            fs::permissions(dir / "rank1.safetensors", fs::perms::none);
        });
        if (root_user)
            c.skipped = "running as root, which reads any file regardless of its permissions";
    }
    {
        Case& c = b.checkpoint("manifest_unreadable", "unreadable", "manifest.json",
                               [](const fs::path& dir) { fs::permissions(dir / "manifest.json", fs::perms::none); });
        if (root_user)
            c.skipped = "running as root, which reads any file regardless of its permissions";
    }

    // ---- checkpoint roots and their `latest`
    b.root("latest_outside", "path_outside_checkpoint",
           [](const fs::path& dir) { write_file(dir / "latest", "../../outside/pristine\n"); });
    b.root("latest_absolute", "path_outside_checkpoint",
           [&](const fs::path& dir) { write_file(dir / "latest", (out / "pristine").string()); });
    b.root("latest_is_symlink", "path_outside_checkpoint",
           [&](const fs::path& dir) { fs::create_symlink(out / "latest-target", dir / "latest"); });
    b.root("latest_names_symlink", "path_outside_checkpoint", [&](const fs::path& dir) {
        fs::create_directory_symlink(out / "pristine", dir / "step-2");
        write_file(dir / "latest", "step-2\n");
    });
    b.root("latest_missing_dir", "partial_write", [](const fs::path& dir) { write_file(dir / "latest", "step-9\n"); });
    b.root("latest_is_fifo", "unreadable",
           [](const fs::path& dir) { must(::mkfifo((dir / "latest").c_str(), 0644) == 0, "mkfifo latest"); });
    b.root("latest_huge", "invalid_manifest",
           [](const fs::path& dir) { write_file(dir / "latest", std::string(1 << 20, 's')); });
    b.root("latest_names_file", "invalid_manifest", [](const fs::path& dir) {
        write_file(dir / "notadir", "x");
        write_file(dir / "latest", "notadir\n");
    });
    return b.take();
}

namespace {

using fixtures::DcpHfChunkSpec;
using fixtures::DcpTensorSpec;

std::string counting_floats(uint64_t n, float first)
{
    std::vector<float> values(n);
    for (uint64_t i = 0; i < n; ++i)
        values[i] = first + float(i);
    return bytes_of(values);
}

// w [8, 6] and b [8] split by rows over `world` ranks, each rank's file as torch writes it.
std::vector<std::vector<DcpHfChunkSpec>> hf_by_rows(uint64_t world)
{
    std::vector<std::vector<DcpHfChunkSpec>> files(world);
    const uint64_t rows = 8 / world;
    for (uint64_t r = 0; r < world; ++r) {
        const uint64_t at = r * rows;
        files[r].push_back({.fqn = "b", .offsets = {at}, .sizes = {rows}, .bytes = counting_floats(rows, float(at))});
        files[r].push_back(
            {.fqn = "w", .offsets = {at, 0}, .sizes = {rows, 6}, .bytes = counting_floats(rows * 6, float(at * 6))});
    }
    return files;
}

// `info`: rank -> the DCP_SHARDING_INFO text written instead of the chunks' own.
void write_hf_shards(const fs::path& dir, const std::vector<std::vector<DcpHfChunkSpec>>& files,
                     const std::map<uint64_t, std::string>& info = {})
{
    fs::create_directories(dir);
    for (uint64_t r = 0; r < files.size(); ++r) {
        const auto it = info.find(r);
        fixtures::write_file(
            dir / fixtures::dcp_hf_shard_name(int(r)),
            fixtures::dcp_hf_shard(files[r], it == info.end() ? std::nullopt : std::optional(it->second)));
    }
}

// model.weight [4, 6] over two ranks and model.bias [6] in rank 0's file.
std::vector<DcpTensorSpec> dcp_two_ranks()
{
    return {
        {.fqn = "model.weight",
         .size = {4, 6},
         .chunks = {{.offsets = {0, 0}, .sizes = {2, 6}, .file = "__0_0.distcp"},
                    {.offsets = {2, 0}, .sizes = {2, 6}, .file = "__1_0.distcp"}}},
        {.fqn = "model.bias", .size = {6}, .chunks = {{.offsets = {0}, .sizes = {6}, .file = "__0_0.distcp"}}},
    };
}

// The folder as FileSystemWriter writes it: each chunk's torch.save archive appended to its file
// (through `store`, which may compress it; `transform` then names the extension).
void write_dcp(const fs::path& dir, std::vector<DcpTensorSpec> tensors,
               const std::function<std::string(const DcpTensorSpec&, std::size_t, const std::string&)>& store = {},
               const std::string& transform = {})
{
    fs::create_directories(dir);
    std::map<std::string, std::string> files;
    for (auto& t : tensors)
        for (std::size_t i = 0; i < t.chunks.size(); ++i) {
            auto& c = t.chunks[i];
            const std::string archive = fixtures::torch_tensor_archive(c.sizes);
            const std::string stored = store ? store(t, i, archive) : archive;
            c.offset = files[c.file].size();
            c.length = stored.size();
            c.transform = transform;
            files[c.file] += stored;
        }
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
    for (const auto& [name, content] : files)
        fixtures::write_file(dir / name, content);
}

} // namespace

Corpus make_foreign_corpus(const fs::path& root)
{
    Corpus corpus{.root = root, .outside = root / "outside", .cases = {}};
    fs::create_directories(corpus.outside);
    auto add = [&](const std::string& name, const std::string& kind, const std::string& file, const std::string& tensor,
                   std::vector<std::string> accepted_by = {}) -> fs::path {
        corpus.cases.push_back({.name = name,
                                .path = root / "cases" / name,
                                .kind = kind,
                                .names = file,
                                .tensor = tensor,
                                .accepted_by = std::move(accepted_by)});
        return corpus.cases.back().path;
    };
    const std::string shard0 = fixtures::dcp_hf_shard_name(0), shard1 = fixtures::dcp_hf_shard_name(1);

    // ---- torch's Hugging Face storage, saved per rank
    {
        auto files = hf_by_rows(2);
        files[1][1].offsets = {0, 0}; // rank 1 claims rank 0's rows of w
        write_hf_shards(add("hf_overlap", "layout_overlap", shard1, "w"), files);
    }
    {
        auto files = hf_by_rows(4);
        files[2].erase(files[2].begin() + 1); // rows 4-5 of w saved nowhere
        write_hf_shards(add("hf_hole", "layout_gap", shard0, "w"), files);
    }
    {
        auto files = hf_by_rows(2);
        files[1][0].offsets = {UINT64_MAX - 1}; // no tensor of b's shape reaches that far
        write_hf_shards(add("hf_chunk_outside", "invalid_shard", shard1, "b"), files);
    }
    write_hf_shards(add("hf_info_rank_disagrees", "invalid_shard", shard1, "w"), hf_by_rows(2),
                    {{1, R"({"b": {"saved_offsets": [4]}, "w": {"saved_offsets": [4]}})"}});
    write_hf_shards(
        add("hf_info_names_other_tensor", "invalid_shard", shard0, "v"), hf_by_rows(2),
        {{0, R"({"b": {"saved_offsets": [0]}, "w": {"saved_offsets": [0, 0]}, "v": {"saved_offsets": [0]}})"}});
    {
        // An FP8 weight in two row chunks, its block scales beside the first of the wrong shape.
        const Fp8Weight w = make_fp8_weight(200, 130, 7);
        const std::string codes(w.codes);
        write_hf_shards(add("hf_fp8_scale_wrong_shape", "invalid_fp8_scale", shard0, "m.weight"),
                        {{{.fqn = "m.weight",
                           .offsets = {0, 0},
                           .sizes = {100, 130},
                           .bytes = codes.substr(0, 13000),
                           .dtype = "F8_E4M3"},
                          {.fqn = "m.weight_scale_inv",
                           .offsets = {0, 0},
                           .sizes = {1, 1},
                           .bytes = bytes_of(std::vector<float>{w.scales[0]})}},
                         {{.fqn = "m.weight",
                           .offsets = {100, 0},
                           .sizes = {100, 130},
                           .bytes = codes.substr(13000),
                           .dtype = "F8_E4M3"}}});
    }

    // ---- torch DCP
    {
        auto tensors = dcp_two_ranks();
        tensors[0].chunks[1].offsets = {1, 0}; // rows 1-2 overlap rank 0's rows 0-1
        write_dcp(add("dcp_overlap", "layout_overlap", ".metadata", "model.weight"), tensors);
    }
    {
        auto tensors = dcp_two_ranks();
        tensors[0].chunks[1].sizes = {1, 6}; // row 3 is saved by nobody
        write_dcp(add("dcp_hole", "layout_gap", ".metadata", "model.weight"), tensors);
    }
    {
        auto tensors = dcp_two_ranks();
        tensors[0].chunks[1].sizes = {3, 6}; // rows 2-4 of a tensor of 4 rows
        write_dcp(add("dcp_chunk_outside", "layout_overlap", ".metadata", "model.weight"), tensors);
    }
    write_dcp(
        add("dcp_zstd_expands", "invalid_archive", "__1_0.distcp", "model.weight", {"info"}), dcp_two_ranks(),
        [](const DcpTensorSpec& t, std::size_t chunk, const std::string& archive) {
            const bool lie = t.fqn == "model.weight" && chunk == 1;
            return fixtures::zstd_raw_frame(
                archive, lie ? std::optional<uint64_t>(archive.size() - 1) : std::optional<uint64_t>(archive.size()));
        },
        "stream.zstd/1");
    {
        const Fp8Weight w = make_fp8_weight(200, 130, 8);
        const fs::path dir = add("dcp_fp8_scale_wrong_shape", "invalid_fp8_scale", "__1_0.distcp", "m.weight");
        fs::create_directories(dir);
        const std::vector<DcpTensorSpec> tensors = {
            {.fqn = "m.weight",
             .size = {200, 130},
             .chunks = {{.offsets = {0, 0}, .sizes = {200, 130}, .file = "__0_0.distcp", .length = 26000}},
             .dtype = "float8_e4m3fn"},
            {.fqn = "m.weight_scale_inv",
             .size = {1, 1},
             .chunks = {{.offsets = {0, 0}, .sizes = {1, 1}, .file = "__1_0.distcp", .length = 4}}}};
        fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
        fixtures::write_file(dir / "__0_0.distcp", w.codes);
        fixtures::write_file(dir / "__1_0.distcp", bytes_of(std::vector<float>{w.scales[0]}));
    }
    return corpus;
}

std::map<std::string, std::string> snapshot(const fs::path& dir)
{
    std::map<std::string, std::string> entries;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied);
         it != fs::recursive_directory_iterator(); ++it) {
        const fs::path& p = it->path();
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0)
            continue;
        std::string info = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
            std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
        if (S_ISREG(st.st_mode) && (st.st_mode & S_IRUSR) && st.st_size < (16 << 20)) {
            shardscope::Sha256 sha;
            const std::string bytes = read_file(p);
            sha.update(bytes.data(), bytes.size());
            info += " " + sha.hex_digest();
        }
        entries[fs::relative(p, dir).string()] = info;
    }
    return entries;
}

} // namespace hostile
