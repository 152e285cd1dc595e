#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the Release build's whole ctest suite
# (GUI tests offscreen), then the core and CLI suites again under AddressSanitizer + UBSan.
source "$(dirname "$0")/setup.sh"
shardscope_setup xvfb xauth python3-torch # real torch.save fixtures for stats
cd "$SHARDSCOPE_ROOT"

shardscope_build release
echo "==> tests (release)"
QT_QPA_PLATFORM=offscreen ctest --preset release -j2

if [ "${SHARDSCOPE_SKIP_ASAN:-0}" != 1 ]; then
    shardscope_build asan
    echo "==> tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
    ctest --preset asan -j2
fi
echo "==> all tests passed"
