#pragma once
// Private to core: the vector types of the value kernels (inspect's stats.cpp and halves.cpp,
// checkpoint's rounding.cpp) and the run-time choice that util's md5_lanes.cpp makes too.
// The build targets baseline x86-64; each kernel has two copies, chosen at run time: W = 8 lanes
// for AVX2 + FMA, W = 4 for the SSE2 every x86-64 has. GCC vector types spell the lanes (they
// lower to NEON elsewhere); vectors go through references, never across the copies' ABI.

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace shardscope {

template <std::size_t W>
struct Lanes; // W floats; f64 holds half of them widened (spelled out: GCC drops a dependent size)

template <>
struct Lanes<8> {
    using f32 = float __attribute__((vector_size(32)));
    using f64 = double __attribute__((vector_size(32)));
    using u32 = uint32_t __attribute__((vector_size(32)));
    using i32 = int32_t __attribute__((vector_size(32)));
    using u16 = uint16_t __attribute__((vector_size(16)));
};

template <>
struct Lanes<4> {
    using f32 = float __attribute__((vector_size(16)));
    using f64 = double __attribute__((vector_size(16)));
    using u32 = uint32_t __attribute__((vector_size(16)));
    using i32 = int32_t __attribute__((vector_size(16)));
    using u16 = uint16_t __attribute__((vector_size(8)));
};

// Whether the 8-lane copies may run: exactly the features they are compiled for (x86-64-v3
// would also allow BMI, LZCNT, MOVBE and F16C, which a CPU reporting AVX2 and FMA need not have).
// SHARDSCOPE_KERNELS=sse2 in the environment keeps to the 4-lane copies (their tests run so).
inline bool has_avx2_fma()
{
#if defined(__x86_64__)
    static const bool yes =
        !(std::getenv("SHARDSCOPE_KERNELS") && std::string_view(std::getenv("SHARDSCOPE_KERNELS")) == "sse2") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
#else
    return false;
#endif
}

} // namespace shardscope
