#pragma once
// Limits on untrusted JSON, checked by a SAX pass before any DOM is built: nesting depth, number
// of values, entries of one top-level array, duplicate top-level keys. A SAX pass is linear and
// allocates nothing per value; nlohmann's parser *callback* is not an option for this, because
// it rescans the enclosing container after every object (quadratic: 131072 "{}" took 45 s).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

namespace shardscope {

struct JsonLimits {
    int max_depth = 64;
    uint64_t max_values = 4ull << 20;
    std::string counted_key; // a top-level key whose array/object entries are counted ...
    uint64_t max_counted = 0; // ... against this limit (0: not counted)
    std::string counted_what; // e.g. "shards", for the message
    bool unique_top_keys = false;
};

struct JsonScan {
    std::string violation; // which limit was exceeded, as a sentence fragment; empty if none
    std::string duplicate_key; // the first repeated top-level key (with unique_top_keys)
    bool syntax_error = false; // let the DOM parser produce its own message
};

namespace detail {

class JsonLimitScanner : public nlohmann::json_sax<nlohmann::json> {
public:
    JsonLimitScanner(const JsonLimits& limits, JsonScan& scan) : m_limits(limits), m_scan(scan) {}

    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override { return open(); }
    bool start_array(std::size_t) override { return open(); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& key) override
    {
        if (m_open == 1) {
            m_top_key = key;
            if (m_limits.unique_top_keys && !m_keys.insert(key).second && m_scan.duplicate_key.empty())
                m_scan.duplicate_key = key;
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override
    {
        m_scan.syntax_error = true;
        return false;
    }

private:
    bool value()
    {
        if (++m_values > m_limits.max_values)
            return fail("holds more than " + std::to_string(m_limits.max_values) + " JSON values (the limit)");
        if (m_open == 2 && m_limits.max_counted && m_top_key == m_limits.counted_key &&
            ++m_counted > m_limits.max_counted)
            return fail("lists more than " + std::to_string(m_limits.max_counted) + " " + m_limits.counted_what +
                        " (the limit)");
        return true;
    }
    bool open()
    {
        if (!value())
            return false;
        if (++m_open > m_limits.max_depth)
            return fail("is nested more than " + std::to_string(m_limits.max_depth) + " levels deep (the limit)");
        return true;
    }
    bool close()
    {
        --m_open;
        return true;
    }
    bool fail(std::string what)
    {
        m_scan.violation = std::move(what);
        return false;
    }

    const JsonLimits& m_limits;
    JsonScan& m_scan;
    int m_open = 0;
    uint64_t m_values = 0;
    uint64_t m_counted = 0;
    std::string m_top_key;
    std::set<std::string> m_keys;
};

} // namespace detail

inline JsonScan scan_json_limits(std::string_view text, const JsonLimits& limits)
{
    JsonScan scan;
    detail::JsonLimitScanner scanner(limits, scan);
    nlohmann::json::sax_parse(text.begin(), text.end(), &scanner);
    return scan;
}

} // namespace shardscope
