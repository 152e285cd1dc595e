#!/usr/bin/env bash
# Installs what is missing, builds in Release the two programs it runs (the app and shardctl, not
# the tests and benchmarks: scripts/test.sh builds those) and opens the demo checkpoint: in the GUI
# when there is a display, otherwise with shardctl.
source "$(dirname "$0")/setup.sh"
shardscope_setup
cd "$SHARDSCOPE_ROOT"
shardscope_build release shardscope shardctl

bin="$SHARDSCOPE_ROOT/build/bin"
if [ -x "$bin/shardscope" ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    echo "==> opening ShardScope on the demo checkpoint"
    exec "$bin/shardscope" "$@"
fi

demo="${XDG_CACHE_HOME:-$HOME/.cache}/shardscope/demo-checkpoint"
if [ ! -f "$demo/manifest.json" ]; then
    rm -rf "$demo"
    "$bin/shardctl" demo-save --out "$demo" --world-size 4 --numel 4000000 --step 1200 --seed 1 --dtype bf16
fi
[ -x "$bin/shardscope" ] && echo "(no display: showing the demo with shardctl; run with a display for the GUI)"
"$bin/shardctl" info "$demo"
"$bin/shardctl" verify "$demo"
