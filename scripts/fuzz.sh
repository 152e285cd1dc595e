#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz and runs one of them.
# Usage: scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags...]
#   TARGET: fuzz_manifest, fuzz_safetensors_header, fuzz_profile, fuzz_index, fuzz_pickle, fuzz_zip,
#           fuzz_inspect, fuzz_trace, fuzz_schedule_csv, fuzz_s3_answer
# The seed corpus is tests/fuzz/corpus/TARGET (read only); new inputs go to build-fuzz/corpus/TARGET
# and crashes to build-fuzz/artifacts/TARGET. A crash is fixed, then its input is committed to
# tests/fuzz/regression/TARGET, which tst_fuzz_regression replays in every test run.
source "$(dirname "$0")/setup.sh"
if [ $# -lt 2 ]; then
    echo "usage: $0 TARGET SECONDS [libFuzzer flags...]" >&2
    exit 2
fi
target="$1"
seconds="$2"
shift 2
shardscope_setup clang libclang-rt-14-dev
cd "$SHARDSCOPE_ROOT"

build="$SHARDSCOPE_ROOT/build-fuzz"
echo "==> configuring and building $target (clang, libFuzzer + ASan + UBSan)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DSHARDSCOPE_BUILD_FUZZERS=ON -DSHARDSCOPE_BUILD_GUI=OFF -DSHARDSCOPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target "$target" -j "${SHARDSCOPE_FUZZ_BUILD_JOBS:-2}"

mkdir -p "$build/corpus/$target" "$build/artifacts/$target"
echo "==> fuzzing $target for $seconds s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# The committed corpora are read when they exist (git keeps no empty regression folder).
corpora=("$build/corpus/$target")
for dir in "tests/fuzz/corpus/$target" "tests/fuzz/regression/$target"; do
    [ -d "$dir" ] && corpora+=("$dir")
done
exec "$build/bin/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
    -artifact_prefix="$build/artifacts/$target/" -print_final_stats=1 "$@" "${corpora[@]}"
