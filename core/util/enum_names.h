#pragma once
// An enum's names in one table, declared beside the enum: to_string and parsing both read it,
// and a static_assert beside the table checks it has one name per enumerator.

#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>

namespace shardscope {

template <class Enum, std::size_t N>
constexpr std::string_view enum_name(Enum value, const std::string_view (&names)[N], std::string_view fallback)
{
    const auto index = static_cast<std::size_t>(value);
    return index < N ? names[index] : fallback;
}

template <class Enum, std::size_t N>
constexpr std::optional<Enum> enum_from_name(std::string_view name, const std::string_view (&names)[N])
{
    for (std::size_t i = 0; i < N; ++i)
        if (names[i] == name)
            return static_cast<Enum>(i);
    return std::nullopt;
}

} // namespace shardscope
