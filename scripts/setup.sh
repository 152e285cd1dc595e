#!/usr/bin/env bash
# Shared by run.sh and test.sh: install what is missing (Debian 12, as root) and build.
# Usage: source scripts/setup.sh; shardscope_setup [extra packages...]; shardscope_build PRESET [targets]
set -euo pipefail

SHARDSCOPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ccache (the presets' compiler launcher) keys on paths relative to the source tree, so a fresh
# clone in another folder (CI) reuses what an earlier build compiled. -g1 (asan preset) would
# otherwise hash the working directory; PCH needs the two sloppiness flags.
export CCACHE_BASEDIR="$SHARDSCOPE_ROOT"
export CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

SHARDSCOPE_PACKAGES=(
    cmake ninja-build g++ pkg-config ccache
    qt6-base-dev qt6-svg-dev libgl-dev
    nlohmann-json3-dev libssl-dev libxxhash-dev zlib1g-dev
    libcurl4-openssl-dev # S3 and HTTP(S) (core/storage)
    libzstd-dev # DCP items written through torch's ZStandard storage extension
    libopenmpi-dev openmpi-bin # shardctl-mpi and its tests
    pybind11-dev python3-dev python3-numpy python3-torch # the Python module, its tests, the ZeRO example
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
