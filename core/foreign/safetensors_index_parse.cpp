// Parsing model.safetensors.index.json in one SAX pass, with no DOM: a mixture-of-experts index
// maps 10^5 tensors, and a DOM of it (a std::map node and two strings per entry, then a second
// std::map copy) cost more time and memory than everything else `shardctl info` does. The events
// come from nlohmann's own SAX parser, so what is valid JSON and the syntax-error sentences are
// exactly those of the DOM parser this replaces; only metadata (small) is still built as a DOM,
// so that its values render as before.

#include "core/foreign/safetensors_index.h"
#include "core/checkpoint/safetensors.h"

#include "core/foreign/internal/json_dom_builder.h"
#include "core/util/error.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace shardscope {

namespace {

constexpr uint32_t kEmpty = 0xffffffffu;
constexpr uint32_t kNotAString = 0xfffffffeu; // a weight_map value that is not a str

[[noreturn]] void bad_index(const std::string& path, const std::string& what)
{
    throw Error(ProblemKind::invalid_manifest, path + ": invalid index: " + what, path);
}

class IndexSax final : public nlohmann::json_sax<nlohmann::json> {
public:
    explicit IndexSax(const std::string& path) : m_path(path) {}

    bool null() override { return scalar(nullptr); }
    bool boolean(bool v) override { return scalar(v); }
    bool number_integer(number_integer_t v) override { return scalar(v); }
    bool number_unsigned(number_unsigned_t v) override { return scalar(v); }
    bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
    bool binary(binary_t&) override { return scalar(nullptr); }
    bool string(string_t& s) override
    {
        if (m_depth == 2 && m_zone == Zone::weight_map && m_wm_object) {
            if (m_entry != kEmpty)
                map.set_file(m_entry, intern_file(s));
            return true;
        }
        return scalar(s);
    }
    bool start_object(std::size_t) override { return open(true); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override
    {
        if (m_depth == 1 && top_is_object) {
            m_zone = k == "weight_map" ? Zone::weight_map : k == "metadata" ? Zone::metadata : Zone::other;
            m_top_key_weight_map = m_zone == Zone::weight_map;
            if (m_zone == Zone::metadata)
                m_metadata = foreign::DomBuilder(16);
        } else if (m_depth == 2 && m_top_key_weight_map && m_wm_object) {
            if (++m_keys > kMaxIndexEntries)
                bad_index(m_path, "more than " + std::to_string(kMaxIndexEntries) + " weight_map entries");
            m_entry = map.size();
            if (!map.add(k, kNotAString)) {
                m_entry = kEmpty;
                if (duplicate.empty())
                    duplicate = k;
            }
        } else if (m_zone == Zone::metadata) {
            m_metadata.key(k);
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override
    {
        bad_index(m_path, std::string("not valid JSON (") + e.what() + ")");
    }

    bool top_is_object = false;
    bool has_weight_map = false, weight_map_is_object = false;
    std::size_t generation_start = 0; // the last weight_map's first entry in `map`
    bool has_metadata = false;
    nlohmann::json metadata;
    IndexWeightMap map; // every weight_map's entries, in order; file: into file_names
    std::vector<std::string> file_names; // distinct weight_map values, in first-seen order
    std::string duplicate;

private:
    enum class Zone { other, weight_map, metadata };

    uint32_t intern_file(const std::string& name)
    {
        if (m_last_file != kEmpty && file_names[m_last_file] == name) // files list tensors in runs
            return m_last_file;
        const auto [it, added] = m_file_ids.try_emplace(name, uint32_t(file_names.size()));
        if (added)
            file_names.push_back(name);
        return m_last_file = it->second;
    }
    template <typename T>
    bool scalar(T&& v)
    {
        if (m_depth == 0)
            top_is_object = false;
        else if (m_depth == 1 && m_zone == Zone::weight_map)
            begin_weight_map(false);
        if (m_zone == Zone::metadata && m_depth >= 1)
            m_metadata.value(nlohmann::json(std::forward<T>(v)));
        if (m_depth == 1 && m_zone == Zone::metadata)
            end_metadata();
        return true;
    }
    bool open(bool object)
    {
        if (m_depth == 0)
            top_is_object = object;
        else if (m_depth == 1 && m_zone == Zone::weight_map)
            begin_weight_map(object);
        else if (m_depth == 2 && m_zone == Zone::weight_map && m_wm_object)
            m_entry = kEmpty; // a container as a file name: the entry stays kNotAString
        if (m_zone == Zone::metadata && m_depth >= 1)
            m_metadata.open(object);
        ++m_depth;
        return true;
    }
    bool close()
    {
        --m_depth;
        if (m_zone == Zone::metadata && m_depth >= 1) {
            m_metadata.close();
            if (m_depth == 1)
                end_metadata();
        }
        if (m_depth == 1 && m_zone == Zone::weight_map)
            m_wm_object = false;
        return true;
    }
    void begin_weight_map(bool object)
    {
        has_weight_map = true;
        weight_map_is_object = m_wm_object = object;
        generation_start = map.size(); // the DOM kept the last of repeated keys
    }
    void end_metadata()
    {
        has_metadata = true;
        metadata = m_metadata.take();
        m_zone = Zone::other;
    }

    const std::string& m_path;
    int m_depth = 0;
    Zone m_zone = Zone::other;
    bool m_top_key_weight_map = false;
    bool m_wm_object = false;
    uint64_t m_keys = 0;
    std::size_t m_entry = kEmpty;
    foreign::DomBuilder m_metadata{16}; // deeper is dropped, as the former parser's callback did
    std::unordered_map<std::string, uint32_t> m_file_ids;
    uint32_t m_last_file = kEmpty;
};

void parse_metadata(const nlohmann::json& md, const std::string& path, SafetensorsIndex& out)
{
    if (md.is_null())
        return;
    if (!md.is_object())
        bad_index(path, "metadata is not an object");
    for (const auto& [key, value] : md.items()) {
        if (key == "total_size") {
            if (value.is_number_unsigned())
                out.total_size = value.get<uint64_t>();
            else if (value.is_number_float() && value.get<double>() >= 0 && value.get<double>() < 1.8e19 &&
                     value.get<double>() == static_cast<double>(static_cast<uint64_t>(value.get<double>())))
                out.total_size = static_cast<uint64_t>(value.get<double>());
            else
                bad_index(path, "metadata.total_size is not a non-negative integer");
            continue;
        }
        std::string text = value.is_string() ? value.get<std::string>() : value.dump();
        if (text.size() > 4096)
            text = text.substr(0, 4096) + "...";
        out.metadata.emplace(key, std::move(text));
    }
}

} // namespace

std::optional<std::size_t> IndexWeightMap::find(std::string_view name) const
{
    if (m_slots.empty())
        return std::nullopt;
    const uint32_t at = m_slots[slot_of(name)];
    return at == kEmpty ? std::nullopt : std::optional<std::size_t>(at);
}

std::size_t IndexWeightMap::slot_of(std::string_view name) const
{
    const std::size_t mask = m_slots.size() - 1;
    for (std::size_t s = std::hash<std::string_view>()(name) & mask;; s = (s + 1) & mask)
        if (m_slots[s] == kEmpty || this->name(m_slots[s]) == name)
            return s;
}

void IndexWeightMap::rehash(std::size_t slots)
{
    m_slots.assign(slots, kEmpty);
    for (std::size_t i = 0; i < m_entries.size(); ++i)
        m_slots[slot_of(name(i))] = static_cast<uint32_t>(i);
}

bool IndexWeightMap::add(std::string_view name, uint32_t file)
{
    if (2 * (m_entries.size() + 1) > m_slots.size()) // at most half full: probes stay short
        rehash(std::max<std::size_t>(64, 2 * m_slots.size()));
    const std::size_t slot = slot_of(name);
    if (m_slots[slot] != kEmpty)
        return false;
    m_slots[slot] = static_cast<uint32_t>(m_entries.size());
    m_entries.push_back({static_cast<uint32_t>(m_names.size()), static_cast<uint32_t>(name.size()), file});
    m_names.append(name);
    return true;
}

SafetensorsIndex parse_safetensors_index(std::string_view json, const std::string& path)
{
    if (json.size() > kMaxIndexBytes)
        bad_index(path,
                  "it is " + std::to_string(json.size()) + " bytes, more than the " + std::to_string(kMaxIndexBytes) +
                      "-byte limit");
    // nlohmann's parser stops at a NUL and takes what follows for padding; the reference does not.
    if (std::string fault = safetensors_text_fault(json); !fault.empty())
        bad_index(path, fault);
    IndexSax sax(path);
    nlohmann::json::sax_parse(json.begin(), json.end(), &sax);
    if (!sax.duplicate.empty())
        bad_index(path, "tensor '" + sax.duplicate + "' appears twice in weight_map");
    if (!sax.top_is_object)
        bad_index(path, "the index is not a JSON object");
    if (!sax.has_weight_map || !sax.weight_map_is_object)
        bad_index(path, "weight_map is missing or not an object");

    // The entries of the last weight_map; the first fault in name order is the one reported.
    const IndexWeightMap& all = sax.map;
    const std::size_t first = sax.generation_start;
    std::vector<std::optional<std::string>> unsafe(sax.file_names.size());
    for (std::size_t f = 0; f < sax.file_names.size(); ++f)
        unsafe[f] = fsutil::unsafe_name_reason(sax.file_names[f]);
    std::optional<std::size_t> fault;
    for (std::size_t i = first; i < all.size(); ++i)
        if ((all.file(i) == kNotAString || unsafe[all.file(i)]) && (!fault || all.name(i) < all.name(*fault)))
            fault = i;
    std::vector<char> used(sax.file_names.size(), 0);
    std::size_t distinct = 0;
    for (std::size_t i = first; i < all.size(); ++i)
        if ((!fault || all.name(i) < all.name(*fault)) && all.file(i) != kNotAString && !used[all.file(i)]) {
            used[all.file(i)] = 1;
            ++distinct;
        }
    if (distinct > kMaxIndexFiles)
        bad_index(path, "more than " + std::to_string(kMaxIndexFiles) + " distinct files");
    if (fault) {
        const std::string tensor(all.name(*fault));
        if (all.file(*fault) == kNotAString)
            bad_index(path, "weight_map['" + tensor + "'] is not a file name");
        bad_index(path,
                  "weight_map['" + tensor + "'] = '" + sax.file_names[all.file(*fault)] +
                      "': " + *unsafe[all.file(*fault)]);
    }

    SafetensorsIndex out;
    std::vector<uint32_t> sorted_id(sax.file_names.size(), kEmpty);
    for (std::size_t f = 0; f < sax.file_names.size(); ++f)
        if (used[f])
            out.files.push_back(sax.file_names[f]);
    std::sort(out.files.begin(), out.files.end());
    for (std::size_t f = 0; f < sax.file_names.size(); ++f)
        if (used[f])
            sorted_id[f] = static_cast<uint32_t>(
                std::lower_bound(out.files.begin(), out.files.end(), sax.file_names[f]) - out.files.begin());
    if (first == 0) {
        out.weight_map = std::move(sax.map);
        for (std::size_t i = 0; i < out.weight_map.size(); ++i)
            out.weight_map.set_file(i, sorted_id[out.weight_map.file(i)]);
    } else { // weight_map given twice: the last one, as the DOM kept it
        for (std::size_t i = first; i < all.size(); ++i)
            out.weight_map.add(all.name(i), sorted_id[all.file(i)]);
    }
    if (sax.has_metadata)
        parse_metadata(sax.metadata, path, out);
    return out;
}

} // namespace shardscope
