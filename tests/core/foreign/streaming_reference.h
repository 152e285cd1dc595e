#pragma once
// References for the streaming parsers: the DOM-based index parser they replaced (kept
// here verbatim, as the definition of what the index parser must accept, reject and say) and the
// inputs both are run over. parse_safetensors_header (core/checkpoint, still DOM-based) is the
// reference for the safetensors header listing.

#include "core/checkpoint/safetensors.h"
#include "core/foreign/safetensors_index.h"
#include "core/util/error.h"
#include "core/util/fsutil.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace reference {

struct Index {
    std::optional<uint64_t> total_size;
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> weight_map;
    std::vector<std::string> files;
};

[[noreturn]] inline void bad_index(const std::string& path, const std::string& what)
{
    throw shardscope::Error(shardscope::ProblemKind::invalid_manifest, path + ": invalid index: " + what, path);
}

// parse_safetensors_index as it was before it streamed (one DOM, a parser callback for duplicates).
inline Index parse_index(std::string_view json, const std::string& path)
{
    using namespace shardscope;
    std::string top_key;
    std::set<std::string> seen;
    std::string duplicate;
    uint64_t keys = 0;
    auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key) {
            if (depth == 1)
                top_key = parsed.get<std::string>();
            else if (depth == 2 && top_key == "weight_map") {
                if (++keys > kMaxIndexEntries)
                    throw std::length_error("too many weight_map entries");
                if (!seen.insert(parsed.get<std::string>()).second && duplicate.empty())
                    duplicate = parsed.get<std::string>();
            }
        }
        return depth <= 16;
    };
    nlohmann::json index;
    try {
        index = nlohmann::json::parse(json.begin(), json.end(), callback);
    } catch (const nlohmann::json::exception& e) {
        bad_index(path, std::string("not valid JSON (") + e.what() + ")");
    } catch (const std::length_error&) {
        bad_index(path, "more than " + std::to_string(kMaxIndexEntries) + " weight_map entries");
    }
    if (!duplicate.empty())
        bad_index(path, "tensor '" + duplicate + "' appears twice in weight_map");
    if (!index.is_object())
        bad_index(path, "the index is not a JSON object");
    Index out;
    const auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object())
        bad_index(path, "weight_map is missing or not an object");
    std::set<std::string> files;
    for (const auto& [tensor, file] : wm->items()) {
        if (!file.is_string())
            bad_index(path, "weight_map['" + tensor + "'] is not a file name");
        const std::string name = file.get<std::string>();
        if (const auto reason = fsutil::unsafe_name_reason(name))
            bad_index(path, "weight_map['" + tensor + "'] = '" + name + "': " + *reason);
        files.insert(name);
        if (files.size() > kMaxIndexFiles)
            bad_index(path, "more than " + std::to_string(kMaxIndexFiles) + " distinct files");
        out.weight_map.emplace(tensor, name);
    }
    out.files.assign(files.begin(), files.end());
    if (const auto md = index.find("metadata"); md != index.end() && !md->is_null()) {
        if (!md->is_object())
            bad_index(path, "metadata is not an object");
        for (const auto& [key, value] : md->items()) {
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
    return out;
}

// Index JSON texts, well-formed and hostile, with a name for the test row.
inline std::vector<std::pair<std::string, std::string>> index_cases()
{
    std::vector<std::pair<std::string, std::string>> c = {
        {"plain", R"({"metadata":{"total_size":96},"weight_map":{"b":"m-2.safetensors","a":"m-1.safetensors"}})"},
        {"metadata kinds", R"({"metadata":{"total_size":1.6e1,"x":[1,{"y":null}],"s":"t","n":-3},"weight_map":{}})"},
        {"metadata null", R"({"metadata":null,"weight_map":{"a":"f"}})"},
        {"metadata array", R"({"metadata":[1],"weight_map":{"a":"f"}})"},
        {"metadata twice", R"({"metadata":{"total_size":-1},"weight_map":{},"metadata":{"total_size":5}})"},
        {"total_size 2^64", R"({"metadata":{"total_size":18446744073709551616},"weight_map":{}})"},
        {"total_size max", R"({"metadata":{"total_size":18446744073709551615},"weight_map":{}})"},
        {"total_size fraction", R"({"metadata":{"total_size":1.5},"weight_map":{}})"},
        {"total_size string", R"({"metadata":{"total_size":"12"},"weight_map":{}})"},
        {"total_size negative", R"({"metadata":{"total_size":-1},"weight_map":{}})"},
        {"total_size twice", R"({"metadata":{"total_size":-1,"total_size":7},"weight_map":{}})"},
        {"huge number", R"({"metadata":{"x":1e400},"weight_map":{}})"},
        {"duplicate tensor", R"({"weight_map":{"a":"x","b":"y","b":"z","a":"w"}})"},
        {"duplicate across maps", R"({"weight_map":{"a":"x"},"weight_map":{"a":"y"}})"},
        {"weight_map twice", R"({"weight_map":{"a":"x","c":"x"},"weight_map":{"b":"y"}})"},
        {"weight_map then scalar", R"({"weight_map":{"a":"x"},"weight_map":3})"},
        {"weight_map array", R"({"weight_map":[{"a":"x"}]})"},
        {"no weight_map", R"({"metadata":{}})"},
        {"nested weight_map", R"({"x":{"weight_map":{"a":1}},"weight_map":{}})"},
        {"non-string file", R"({"weight_map":{"b":"ok","a":1}})"},
        {"object file", R"({"weight_map":{"a":{"b":["c"]},"b":"f"}})"},
        {"faults in name order", R"({"weight_map":{"z":2,"m":"../x","c":"/abs","d":[]}})"},
        {"escaping path", R"({"weight_map":{"a":"../x.safetensors"}})"},
        {"absolute path", R"({"weight_map":{"a":"/etc/passwd"}})"},
        {"escaped names", R"({"weight_map":{"a\"\\\u00e9\n":"f\u0041"}})"},
        {"array", "[]"},
        {"string", R"("weight_map")"},
        {"empty", ""},
        {"truncated", R"({"weight_map":{"a":"x")"},
        {"trailing garbage", R"({"weight_map":{}} x)"},
        {"bom", "\xEF\xBB\xBF{\"weight_map\":{\"a\":\"f\"}}"},
        {"invalid utf-8", "{\"weight_map\":{\"\xff\":\"f\"}}"},
        {"lone surrogate", R"({"weight_map":{"\ud800":"f"}})"},
        {"deep metadata", R"({"metadata":{"d":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]},"weight_map":{}})"},
    };
    std::string many = R"({"weight_map":{)";
    for (uint32_t i = 0; i <= shardscope::kMaxIndexFiles; ++i)
        many += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":\"f" + std::to_string(i) + "\"";
    c.emplace_back("too many files", many + "}}");
    return c;
}

// Safetensors header JSON texts and the file size each is checked against.
struct HeaderCase {
    std::string name, json;
    uint64_t data_bytes = 0; // the file holds 8 + json + this
};
inline std::vector<HeaderCase> header_cases()
{
    const std::string t = R"("dtype":"F32","shape":[2,2],"data_offsets":[0,16])";
    std::vector<HeaderCase> c = {
        {"plain",
         R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]},"a":{)" + t + "}}",
         24},
        {"scalar tensor", R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}})", 8},
        {"empty", "{}", 0},
        {"empty with data", "{}", 4},
        {"zero-size", R"({"z":{"dtype":"U8","shape":[0,5],"data_offsets":[0,0]}})", 0},
        {"repeated field",
         R"({"a":{"dtype":"I8","shape":[3],"data_offsets":[0,3],"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})",
         16},
        {"extra fields", R"({"a":{"x":{"dtype":[1]},)" + t + R"(,"y":[[1],{"shape":2}]}})", 16},
        {"duplicate tensor", R"({"a":{)" + t + R"(},"b":{)" + t + R"(},"b":{)" + t + R"(},"a":{)" + t + "}}", 16},
        {"duplicate metadata", R"({"__metadata__":{},"__metadata__":{}})", 0},
        {"metadata not object", R"({"__metadata__":[1]})", 0},
        {"metadata scalar", R"({"__metadata__":"x"})", 0},
        {"metadata non-string", R"({"__metadata__":{"b":"x","a":1}})", 0},
        {"metadata fault first", R"({"a":{"dtype":"F32"},"__metadata__":{"k":2}})", 0},
        {"metadata fault second", R"({"Z":{"dtype":"F32"},"__metadata__":{"k":2}})", 0},
        {"lacks field", R"({"a":{"dtype":"F32","shape":[1]}})", 4},
        {"tensor not object", R"({"a":[1,2]})", 0},
        {"tensor scalar", R"({"a":5})", 0},
        {"non-string dtype", R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4},
        {"unknown dtype", R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16},
        {"shape not array", R"({"a":{"dtype":"F32","shape":{"0":1},"data_offsets":[0,4]}})", 4},
        {"negative dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4},
        {"float dim", R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4},
        {"nested dim", R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4},
        {"overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4},
        {"huge dim", R"({"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}})", 4},
        {"offsets count", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4},
        {"offsets negative", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4},
        {"offsets reversed", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4},
        // JSON parsers stop at a NUL and would take what follows for padding
        {"NUL then text", std::string(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})") + '\0' + " {{{", 1},
        {"NUL alone", std::string("{}") + '\0', 0},
        {"covers", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4},
        {"faults in name order", R"({"z":{"dtype":1},"m":{"dtype":"F32","shape":[1],"data_offsets":[0,8]},"q":3})", 8},
        {"gap",
         R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
         3},
        {"overlap",
         R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
         2},
        {"short file", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 2},
        {"array", "[]", 0},
        {"truncated", R"({"a":{"dtype":"F32")", 0},
        {"trailing garbage", "{} {}", 0},
        {"invalid utf-8", "{\"\xc0\x80\":{}}", 0},
        {"deep", std::string(17, '[') + std::string(17, ']'), 0},
        {"deep after error", "[" + std::string(20, '{'), 0},
    };
    std::string shape65 = "[1";
    for (int i = 0; i < 64; ++i)
        shape65 += ",1";
    c.push_back({"65 dims", R"({"a":{"dtype":"U8","shape":)" + shape65 + R"(],"data_offsets":[0,1]}})", 1});
    std::string values = R"({"a":[0)";
    for (uint64_t i = 0; i < shardscope::kMaxSafetensorsHeaderValues; ++i)
        values += ",0";
    c.push_back({"too many values", values + "]}", 0});
    return c;
}

} // namespace reference
