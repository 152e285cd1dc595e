#!/usr/bin/env bash
# Shared by run.sh and test.sh: install what is missing (Debian 12, as root) and build.
# Usage: source scripts/setup.sh; shardscope_setup [extra packages...]; shardscope_build PRESET [targets]
set -euo pipefail

SHARDSCOPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SHARDSCOPE_PACKAGES=(
    cmake ninja-build g++ pkg-config
    qt6-base-dev qt6-svg-dev libgl-dev
    nlohmann-json3-dev libssl-dev libxxhash-dev zlib1g-dev
    libopenmpi-dev openmpi-bin # shardctl-mpi and its tests
)

shardscope_setup() {
    local wanted=("${SHARDSCOPE_PACKAGES[@]}" "$@") missing=() pkg
    for pkg in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "==> installing: ${missing[*]}"
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

# shardscope_build PRESET [TARGET...]: configure (once) and build with the CMake preset.
shardscope_build() {
    local preset="$1"
    shift
    cd "$SHARDSCOPE_ROOT"
    echo "==> configuring and building ($preset)"
    cmake --preset "$preset" >/dev/null
    if [ $# -gt 0 ]; then
        cmake --build --preset "$preset" --target "$@"
    else
        cmake --build --preset "$preset"
    fi
}
