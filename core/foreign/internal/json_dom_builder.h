#pragma once
// Building a DOM for one JSON value out of SAX events, for the streaming parsers of the index and
// of safetensors headers: they keep only small parts (metadata) as a DOM, so that those render and
// check exactly as they did when the whole document was one.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shardscope::foreign {

// Builds the DOM of one value from SAX events (metadata only), like nlohmann's DOM parser: an
// object's repeated key keeps the last value.
class DomBuilder {
public:
    explicit DomBuilder(int max_depth) : m_max_depth(max_depth) {}

    void value(nlohmann::json v)
    {
        if (m_dropped)
            return;
        if (m_stack.empty()) {
            m_root = std::move(v);
        } else if (m_stack.back()->is_array()) {
            m_stack.back()->push_back(std::move(v));
        } else {
            (*m_stack.back())[m_key] = std::move(v);
        }
    }
    void open(bool object)
    {
        if (m_dropped || int(m_stack.size()) >= m_max_depth) {
            ++m_dropped;
            return;
        }
        value(object ? nlohmann::json::object() : nlohmann::json::array());
        nlohmann::json* made = m_stack.empty() ? &m_root
            : m_stack.back()->is_array()       ? &m_stack.back()->back()
                                               : &(*m_stack.back())[m_key];
        m_stack.push_back(made);
    }
    void close()
    {
        if (m_dropped)
            --m_dropped;
        else
            m_stack.pop_back();
    }
    void key(const std::string& k)
    {
        if (!m_dropped)
            m_key = k;
    }
    nlohmann::json take() { return std::move(m_root); }

private:
    nlohmann::json m_root;
    std::vector<nlohmann::json*> m_stack;
    std::string m_key;
    int m_max_depth;
    int m_dropped = 0; // containers open beyond m_max_depth: their contents are dropped
};

} // namespace shardscope::foreign
