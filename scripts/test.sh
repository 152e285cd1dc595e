#!/usr/bin/env bash
# Installs what is missing, checks the source layout, builds, and runs every test: the Release
# build's whole ctest suite (GUI tests offscreen), then the core and CLI suites again under
# AddressSanitizer + UBSan.
source "$(dirname "$0")/setup.sh"
shardscope_setup xvfb xauth python3-torch clang-format curl radosgw ceph-mon ceph-osd ceph-common # torch.save fixtures for stats; the layout check; the S3 server (scripts/s3-test-server.sh)
cd "$SHARDSCOPE_ROOT"

echo "==> layout (clang-format, .clang-format)"
find core widgets app python tests -name '*.cpp' -o -name '*.h' | sort | xargs clang-format --dry-run --Werror

shardscope_build release
echo "==> tests (release)"
QT_QPA_PLATFORM=offscreen ctest --preset release -j2

if [ "${SHARDSCOPE_SKIP_ASAN:-0}" != 1 ]; then
    shardscope_build asan
    echo "==> tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
    ctest --preset asan -j2
fi
echo "==> all tests passed"
