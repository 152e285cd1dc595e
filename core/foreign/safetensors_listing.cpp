// A safetensors header in one SAX pass (safetensors_listing.h). The checks are those of
// parse_safetensors_header, in the same order, so that the same header gets the same sentence:
// the limits as the values stream past (what the former limit scan did), then syntax, then the
// first repeated top-level key, then whether the header is an object, then the per-tensor faults
// of the first faulty key in name order (the DOM's iteration order), then the tiling.

#include "core/foreign/safetensors_listing.h"

#include "core/foreign/internal/json_dom_builder.h"
#include "core/util/error.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <tuple>

namespace shardscope {

namespace {

constexpr std::array<std::string_view, 16> kDtypes = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
                                                      "BF16", "I32", "U32", "F32",     "F64",     "I64", "U64", "C64"};

struct Where {
    const std::string& path;
    int rank;
};

[[noreturn]] void bad(const Where& w, const std::string& what)
{
    std::string prefix = w.path;
    if (w.rank >= 0)
        prefix += " (rank " + std::to_string(w.rank) + ")";
    throw Error(ProblemKind::invalid_shard, prefix + ": invalid safetensors header: " + printable(what, 1000), w.path,
                w.rank);
}

// A JSON number or anything else, as the DOM's is_number_unsigned() would see it.
struct Element {
    bool is_unsigned = false;
    uint64_t value = 0;
};
// The last value given for one field of a tensor object (the DOM kept the last of repeated keys).
struct Field {
    bool present = false;
    bool is_array = false, is_string = false;
    std::string text; // dtype
    std::size_t count = 0; // array elements
    std::vector<Element> elements; // the first 65 (more is an invalid shape whatever they are)
};

class HeaderSax final : public nlohmann::json_sax<nlohmann::json> {
public:
    HeaderSax(const Where& where, SafetensorsListing& out) : m_where(where), m_out(out) {}

    bool null() override { return scalar(Element{}, nullptr); }
    bool boolean(bool v) override { return scalar(Element{}, v); }
    bool number_integer(number_integer_t v) override { return scalar(Element{}, v); }
    bool number_unsigned(number_unsigned_t v) override { return scalar(Element{true, v}, v); }
    bool number_float(number_float_t v, const string_t&) override { return scalar(Element{}, v); }
    bool binary(binary_t&) override { return scalar(Element{}, nullptr); }
    bool string(string_t& s) override
    {
        if (m_open == 2 && m_field && m_in_tensor) {
            m_field->is_string = true;
            m_field->text = s;
        }
        return scalar(Element{}, s);
    }
    bool start_object(std::size_t) override { return open(true); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override
    {
        if (m_open == 1 && top_is_object) {
            m_item_offset = static_cast<uint32_t>(m_out.names.size());
            m_out.names += k;
            keys.push_back({m_item_offset, static_cast<uint32_t>(k.size())});
            m_is_metadata = k == "__metadata__";
            if (m_is_metadata)
                m_metadata = foreign::DomBuilder(1 << 30); // the limit scan bounds its depth
        } else if (m_open == 2 && m_in_tensor) {
            m_field = k == "dtype" ? &m_dtype : k == "shape" ? &m_shape : k == "data_offsets" ? &m_offsets : nullptr;
            if (m_field)
                *m_field = Field{.present = true};
        } else if (m_open >= 2 && m_in_metadata) {
            m_metadata.key(k);
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override
    {
        bad(m_where, std::string("not valid JSON (") + e.what() + ")");
    }

    struct Key {
        uint32_t offset, size;
    };
    bool top_is_object = false;
    std::vector<Key> keys; // every top-level key, in order (for repeats)
    std::string fault_name, fault; // the faulty key first in name order, and what is wrong
    bool has_fault = false;
    bool has_metadata = false;
    nlohmann::json metadata;

private:
    bool count_value()
    {
        if (++m_values > kMaxSafetensorsHeaderValues)
            bad(m_where,
                "the header holds more than " + std::to_string(kMaxSafetensorsHeaderValues) +
                    " JSON values (the limit)");
        return true;
    }
    template <typename T>
    bool scalar(Element element, T&& v)
    {
        count_value();
        if (m_open == 0) {
            top_is_object = false;
        } else if (m_open == 1 && top_is_object) {
            if (m_is_metadata) {
                m_metadata.value(nlohmann::json(std::forward<T>(v)));
                end_metadata();
            } else {
                fault_at("tensor '" + item_name() + "' lacks dtype, shape or data_offsets");
            }
        } else if (m_open == 3 && m_in_tensor && m_field) {
            add_element(element);
        } else if (m_in_metadata) {
            m_metadata.value(nlohmann::json(std::forward<T>(v)));
        }
        return true;
    }
    bool open(bool object)
    {
        count_value();
        if (++m_open > kMaxSafetensorsHeaderDepth)
            bad(m_where,
                "the header is nested more than " + std::to_string(kMaxSafetensorsHeaderDepth) +
                    " levels deep (the limit)");
        if (m_open == 1) {
            top_is_object = object;
        } else if (m_open == 2 && top_is_object) {
            if (m_is_metadata) {
                m_in_metadata = true;
                m_metadata.open(object);
            } else if (object) {
                m_in_tensor = true;
                m_dtype = m_shape = m_offsets = Field{};
                m_field = nullptr;
            } else {
                fault_at("tensor '" + item_name() + "' lacks dtype, shape or data_offsets");
            }
        } else if (m_in_metadata) {
            m_metadata.open(object);
        } else if (m_in_tensor && m_field) {
            if (m_open == 3)
                m_field->is_array = !object;
            else if (m_open == 4)
                add_element(Element{}); // a container inside shape / data_offsets
        }
        return true;
    }
    bool close()
    {
        --m_open;
        if (m_in_metadata) {
            m_metadata.close();
            if (m_open == 1)
                end_metadata();
        } else if (m_in_tensor && m_open == 1) {
            m_in_tensor = false;
            end_tensor();
        }
        return true;
    }
    void add_element(Element e)
    {
        if (m_field->elements.size() < 65)
            m_field->elements.push_back(e);
        ++m_field->count;
    }
    void end_metadata()
    {
        m_in_metadata = false;
        has_metadata = true;
        metadata = m_metadata.take();
    }
    std::string item_name() const { return m_out.names.substr(m_item_offset); }
    // Faults are reported for the key first in name order; every check below is local to its key.
    void fault_at(std::string what)
    {
        const std::string_view name = std::string_view(m_out.names).substr(m_item_offset);
        if (!has_fault || name < fault_name) {
            has_fault = true;
            fault_name = std::string(name);
            fault = std::move(what);
        }
    }
    void end_tensor()
    {
        const std::string name = item_name();
        if (!m_dtype.present || !m_shape.present || !m_offsets.present)
            return fault_at("tensor '" + name + "' lacks dtype, shape or data_offsets");
        if (!m_dtype.is_string)
            return fault_at("tensor '" + name + "' has a non-string dtype");
        const auto element = safetensors_dtype_size(m_dtype.text);
        if (!element)
            return fault_at("tensor '" + name + "' has unknown dtype '" + m_dtype.text + "'");
        if (!m_shape.is_array || m_shape.count > 64)
            return fault_at("tensor '" + name + "' has an invalid shape");
        SafetensorsListing::Tensor t;
        t.name_offset = m_item_offset;
        t.name_size = static_cast<uint32_t>(name.size());
        t.dtype = static_cast<uint8_t>(std::find(kDtypes.begin(), kDtypes.end(), m_dtype.text) - kDtypes.begin());
        t.dims_offset = static_cast<uint32_t>(m_out.dims.size());
        t.rank = static_cast<uint16_t>(m_shape.count);
        uint64_t bytes = *element;
        for (const Element& dim : m_shape.elements) {
            if (!dim.is_unsigned)
                return fault_at("tensor '" + name + "' has a non-integer dimension");
            if (__builtin_mul_overflow(bytes, dim.value, &bytes))
                return fault_at("tensor '" + name + "' has a shape whose size overflows");
        }
        const auto& o = m_offsets.elements;
        if (!m_offsets.is_array || m_offsets.count != 2 || !o[0].is_unsigned || !o[1].is_unsigned)
            return fault_at("tensor '" + name + "' has invalid data_offsets");
        t.begin = o[0].value;
        t.end = o[1].value;
        if (std::string fault = safetensors_range_fault(name, t.begin, t.end, bytes); !fault.empty())
            return fault_at(fault);
        for (const Element& dim : m_shape.elements)
            m_out.dims.push_back(dim.value);
        m_out.tensors.push_back(t);
    }

    const Where& m_where;
    SafetensorsListing& m_out;
    uint64_t m_values = 0;
    int m_open = 0;
    uint32_t m_item_offset = 0;
    bool m_is_metadata = false, m_in_metadata = false, m_in_tensor = false;
    Field m_dtype, m_shape, m_offsets;
    Field* m_field = nullptr;
    foreign::DomBuilder m_metadata{1 << 30};
};

} // namespace

std::span<const std::string_view> safetensors_dtype_names()
{
    return kDtypes;
}

std::string_view SafetensorsListing::dtype(const Tensor& t) const
{
    return kDtypes[t.dtype];
}

SafetensorsListing list_safetensors_header(std::string_view json, uint64_t file_size, const std::string& display_path,
                                           int rank)
{
    const Where where{display_path, rank};
    SafetensorsListing out;
    out.header_length = json.size();
    if (std::string fault = safetensors_text_fault(json); !fault.empty())
        bad(where, fault);
    HeaderSax sax(where, out);
    nlohmann::json::sax_parse(json.begin(), json.end(), &sax);

    // The first key repeated, in the order of the repeats (what a set of seen keys would find).
    std::vector<uint32_t> order(sax.keys.size());
    for (uint32_t i = 0; i < order.size(); ++i)
        order[i] = i;
    auto key = [&](uint32_t i) { return std::string_view(out.names).substr(sax.keys[i].offset, sax.keys[i].size); };
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    uint32_t repeat = UINT32_MAX;
    for (std::size_t i = 1; i < order.size(); ++i)
        if (key(order[i]) == key(order[i - 1])) // within a run the indices ascend: the least is a repeat
            repeat = std::min(repeat, order[i]);
    if (repeat != UINT32_MAX)
        bad(where, "tensor '" + std::string(key(repeat)) + "' appears twice");
    if (!sax.top_is_object)
        bad(where, "the header is not a JSON object");

    // __metadata__ takes its place in name order among the tensors' faults.
    if (sax.has_metadata) {
        std::string fault;
        if (!sax.metadata.is_object()) {
            fault = "__metadata__ is not an object";
        } else {
            for (const auto& [k, text] : sax.metadata.items()) {
                if (!text.is_string()) {
                    fault = "__metadata__ value '" + k + "' is not a string";
                    break;
                }
                out.metadata.emplace_back(k, text.get<std::string>());
            }
        }
        if (!fault.empty() && (!sax.has_fault || std::string_view("__metadata__") < sax.fault_name))
            bad(where, fault);
    }
    if (sax.has_fault)
        bad(where, sax.fault);

    // Ties broken by name as read_safetensors_header breaks them: the same overlap named the same.
    std::sort(out.tensors.begin(), out.tensors.end(), [&](const auto& a, const auto& b) {
        return std::tuple(a.begin, a.end, out.name(a)) < std::tuple(b.begin, b.end, out.name(b));
    });
    uint64_t expected = 0;
    for (const auto& t : out.tensors) {
        if (t.begin != expected)
            bad(where,
                "tensor '" + std::string(out.name(t)) + "' starts at byte " + std::to_string(t.begin) +
                    " of the data but the previous tensor ends at " + std::to_string(expected) +
                    (t.begin > expected ? " (a gap)" : " (an overlap)"));
        expected = t.end;
    }
    if (file_size < out.data_start())
        bad(where,
            "the " + std::to_string(out.header_length) + "-byte header runs past the end of the " +
                std::to_string(file_size) + "-byte file");
    const uint64_t data_size = file_size - out.data_start();
    if (expected != data_size)
        bad(where,
            "the tensors end at data byte " + std::to_string(expected) + " but the file holds " +
                std::to_string(data_size) + " data bytes");
    return out;
}

SafetensorsListing read_safetensors_listing(const storage::Reader& file, uint64_t file_size,
                                            const std::string& display_path, int rank)
{
    return list_safetensors_header(read_safetensors_header_json(file, file_size, display_path, rank), file_size,
                                   display_path, rank);
}

} // namespace shardscope
