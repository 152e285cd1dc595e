#pragma once
// Hugging Face sharded safetensors: `model.safetensors.index.json` ({"metadata": {"total_size":
// N}, "weight_map": {tensor: file}}) plus the files it names. Parsing the index is separate from
// verifying the folder so that it can be tested and fuzzed on bytes alone.

#include "core/checkpoint/verify.h"
#include "core/util/fsutil.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

inline constexpr uint64_t kMaxIndexBytes = 64ull << 20; // index.json read at most
inline constexpr uint64_t kMaxIndexEntries = 4u << 20; // weight_map entries
inline constexpr uint64_t kMaxIndexFiles = 1u << 16; // distinct files

// weight_map, compactly (an MoE index maps 10^5 tensors to a few hundred files): every name in one
// arena, every file an index into SafetensorsIndex::files, a hash table over the names. Entries
// are in the order the index lists them.
class IndexWeightMap {
public:
    std::size_t size() const { return m_entries.size(); }
    bool empty() const { return m_entries.empty(); }
    std::string_view name(std::size_t i) const
    {
        return std::string_view(m_names).substr(m_entries[i].name_offset, m_entries[i].name_size);
    }
    uint32_t file(std::size_t i) const { return m_entries[i].file; } // index into files
    // The entry named `name`, or nullopt.
    std::optional<std::size_t> find(std::string_view name) const;

    // Adds an entry; false (and nothing added) when `name` is there already.
    bool add(std::string_view name, uint32_t file);
    void set_file(std::size_t i, uint32_t file) { m_entries[i].file = file; }

private:
    struct Entry {
        uint32_t name_offset = 0, name_size = 0, file = 0;
    };
    std::size_t slot_of(std::string_view name) const;
    void rehash(std::size_t slots);

    std::string m_names;
    std::vector<Entry> m_entries;
    std::vector<uint32_t> m_slots; // open addressing over m_entries; kEmpty when free
};

struct SafetensorsIndex {
    std::optional<uint64_t> total_size; // metadata.total_size when present
    std::map<std::string, std::string> metadata; // other metadata rendered as text
    IndexWeightMap weight_map; // tensor -> index into files
    std::vector<std::string> files; // distinct files, sorted
};

// Parses the index JSON in one streaming pass (no DOM: see safetensors_index_parse.cpp). Throws
// Error(invalid_manifest) naming `display_path` on bad input: not a JSON object, weight_map missing
// or not string-to-string, duplicate tensor names, a file name that is not a plain relative path
// inside the folder, too many entries or files, a non-integer total_size. Where an index has
// several faults, the one reported is the one a reader going through weight_map in name order
// meets first.
SafetensorsIndex parse_safetensors_index(std::string_view json, const std::string& display_path);
inline SafetensorsIndex parse_safetensors_index(const uint8_t* data, std::size_t size,
                                                const std::string& display_path = "<index>")
{
    return parse_safetensors_index(std::string_view(reinterpret_cast<const char*>(data), size), display_path);
}

// An index against the tensors its files hold, as verify, stats and diff all say it: a tensor a
// file holds that the index maps to another file or not at all (unmapped_tensor), and one the
// index maps to a file that was read and lacks it (missing_tensor). Each problem names the file
// (`dir` / file) and goes to `say`, which keeps as many as its caller lists.
class IndexCheck {
public:
    IndexCheck(const SafetensorsIndex& index, std::filesystem::path dir, std::function<void(Problem)> say);
    IndexCheck(SafetensorsIndex&&, std::filesystem::path, std::function<void(Problem)>) = delete; // kept by reference
    // `file` (a name in index.files) holds tensor `name`: true when the index maps it there; else
    // false, and the problem said when the tensor is `wanted`.
    bool holds(std::string_view file, std::string_view name, bool wanted = true);
    // Once every file was read: each tensor the index maps to a file `read` says was read and that
    // holds() did not find there, in name order, of those `wanted` (every one when null).
    void say_lacking(const std::function<bool(std::size_t file)>& read,
                     const std::function<bool(std::string_view name)>& wanted = nullptr);
    const SafetensorsIndex& index() const { return m_index; }

private:
    const SafetensorsIndex& m_index;
    const std::filesystem::path m_dir;
    const std::function<void(Problem)> m_say;
    std::vector<char> m_held; // per weight_map entry: found in its file
};

// The index `index_name` of `dir` parsed, or nullopt with its problem (naming the index) added to
// `report`: what every verifier of an indexed folder starts with.
std::optional<SafetensorsIndex> read_index_for(const storage::Folder& dir, const std::string& index_name,
                                               VerifyReport& report);

// Verifies a folder (listed) holding `index_name` (default model.safetensors.index.json): every file of
// the weight_map exists and is valid safetensors, every mapped tensor is in its file, no file
// holds unmapped tensors, metadata.total_size equals the sum of tensor bytes.
VerifyReport verify_safetensors_index(const storage::Folder& dir, const VerifyOptions& options,
                                      const std::string& index_name = "model.safetensors.index.json");

// Verifies the .safetensors files among `dir`'s names: a folder without an index, or one file
// (core/open lists a single file's folder as that file alone).
VerifyReport verify_safetensors_files(const storage::Folder& dir, const VerifyOptions& options);

} // namespace shardscope
