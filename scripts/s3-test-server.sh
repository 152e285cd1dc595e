#!/usr/bin/env bash
# A real S3 server for tests: Ceph's RADOS Gateway (radosgw, Ceph 16 "pacific" from Debian 12) over
# a throwaway single-node cluster - one monitor, one memory-backed OSD, no manager, no auth - all of
# it living in one state directory. Nothing is read from or written to /etc/ceph or /var/lib/ceph.
#
#   scripts/s3-test-server.sh start [DIR]   bring it up; print `export` lines (also in DIR/env.sh)
#   scripts/s3-test-server.sh env   [DIR]   print the export lines of a running server
#   scripts/s3-test-server.sh stop  [DIR]   stop gateway, OSD, monitor; remove DIR (idempotent)
#   scripts/s3-test-server.sh gateway DIR [PORT]
#                                           one more gateway of the same cluster (same buckets and
#                                           keys), for a test that kills it mid-upload: prints its
#                                           endpoint and pid; `stop` stops it too
#
# Without DIR, start makes /tmp/shardscope-s3.XXXXXX and remembers it in /tmp/shardscope-s3.current
# so that a later `env` or `stop` without DIR finds it. The OSD holds up to 2 GiB
# (SHARDSCOPE_S3_MEMSTORE_MIB to change it); a deleted object's data is freed by the gateway's
# garbage collection hours later, so a benchmark that writes more in rounds needs more.
# SHARDSCOPE_S3_CPUS (comma-separated CPUs or ranges, "0" or "0-3") runs the monitor, the OSD and
# the first gateway on those CPUs only, for a benchmark whose clients run on the others (bench_s3
# says where each runs). See docs/s3-testing.md.
set -euo pipefail

readonly CURRENT=/tmp/shardscope-s3.current
readonly MARKER=.shardscope-s3-state # stop removes only directories that carry it
readonly READY_TIMEOUT=60 # seconds; a healthy start takes a few
readonly STOP_TIMEOUT=15  # seconds per daemon before SIGKILL

die() {
    echo "s3-test-server: $*" >&2
    exit 1
}

# A port the kernel considers free on loopback right now. Another process could take it before the
# daemon binds; start then fails with the daemon's own "address in use" in the log tail.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

resolve_dir() {
    local dir=${1:-}
    if [ -z "$dir" ] && [ -f "$CURRENT" ]; then
        dir=$(cat "$CURRENT")
    fi
    [ -n "$dir" ] || die "no state directory given and none recorded in $CURRENT"
    echo "$dir"
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Stops one daemon by its pid file: SIGTERM, a bounded wait, then SIGKILL.
stop_daemon() {
    local pidfile=$1 pid i
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if pid_alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
            pid_alive "$pid" || break
            sleep 0.1
        done
        if pid_alive "$pid"; then
            echo "s3-test-server: $(basename "$pidfile" .pid) ignored SIGTERM for ${STOP_TIMEOUT}s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                pid_alive "$pid" || break
                sleep 0.1
            done
        fi
    fi
    rm -f "$pidfile"
}

# Order matters: the gateway holds watches on OSD objects and the OSD reports to the monitor;
# stopping the monitor first leaves the others retrying for their full timeouts.
stop_all() {
    local dir=$1 pidfile
    for pidfile in "$dir"/run/client.rgw*.pid; do
        stop_daemon "$pidfile"
    done
    stop_daemon "$dir/run/osd.0.pid"
    stop_daemon "$dir/run/mon.a.pid"
}

cmd_stop() {
    local dir=${1:-}
    if [ -z "$dir" ]; then
        [ -f "$CURRENT" ] || return 0 # nothing recorded: nothing to stop
        dir=$(cat "$CURRENT")
    fi
    if [ -d "$dir" ]; then
        # Never delete a directory this script did not make.
        [ -f "$dir/$MARKER" ] || die "$dir was not made by s3-test-server.sh start; not removing it"
        stop_all "$dir"
        rm -rf "$dir"
    fi
    if [ -f "$CURRENT" ] && [ "$(cat "$CURRENT")" = "$dir" ]; then
        rm -f "$CURRENT"
    fi
}

cmd_env() {
    local dir pid
    dir=$(resolve_dir "${1:-}")
    [ -f "$dir/env.sh" ] || die "$dir/env.sh not found: no server was started there"
    pid=$(cat "$dir/run/client.rgw.pid" 2>/dev/null || true)
    pid_alive "$pid" || die "the gateway of $dir is not running"
    cat "$dir/env.sh"
}

write_conf() {
    local dir=$1 fsid=$2 mon_port=$3 memstore_mib=${SHARDSCOPE_S3_MEMSTORE_MIB:-2048}
    # Every path points into the state dir. `ms * mode = crc`: with auth off the messenger still
    # negotiates a mode, and without crc on both sides the gateway's monitor client never connects.
    # A tiny paxos propose interval makes each monitor command (pool create, osd new) take
    # milliseconds instead of about a second.
    cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms mon cluster mode = crc
ms mon service mode = crc
ms cluster mode = crc
ms service mode = crc
ms client mode = crc
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
mon cluster log file = $dir/log/cluster.log
crash dir = $dir/crash
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon max pg per osd = 1000

[mon]
mon data = $dir/mon/\$cluster-\$id
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
paxos propose interval = 0.01

[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = $((memstore_mib * 1048576))
osd max object name len = 460
osd max object namespace len = 64

[client.rgw]
rgw data = $dir/rgw
rgw thread pool size = 32
rgw dns name = localhost
EOF
    : >"$dir/keyring"
}

# Prints the tail of the logs that explain a failed start, stops what started, and fails.
fail_start() {
    local dir=$1 msg=$2 f
    echo "s3-test-server: $msg" >&2
    for f in "$dir"/log/*.log "$dir"/log/*.out; do
        [ -s "$f" ] || continue
        echo "---- tail of $f" >&2
        tail -n 25 "$f" >&2
    done
    stop_all "$dir"
    exit 1
}

cmd_start() {
    local dir=${1:-} t0 fsid mon_port rgw_port osd_uuid osd_id access secret i endpoint
    t0=$(date +%s.%N)
    for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool uuidgen curl python3 openssl; do
        command -v "$tool" >/dev/null || die "$tool not found; install Debian's radosgw, ceph-mon, ceph-osd, ceph-common"
    done
    [[ "${SHARDSCOPE_S3_MEMSTORE_MIB:-2048}" =~ ^[1-9][0-9]{2,5}$ ]] ||
        die "SHARDSCOPE_S3_MEMSTORE_MIB='${SHARDSCOPE_S3_MEMSTORE_MIB}': the OSD's memory in MiB, 100 to 999999"
    local on=() # the daemons' CPUs: every one unless SHARDSCOPE_S3_CPUS says
    if [ -n "${SHARDSCOPE_S3_CPUS:-}" ]; then
        command -v taskset >/dev/null || die "taskset not found (util-linux); SHARDSCOPE_S3_CPUS needs it"
        [[ "$SHARDSCOPE_S3_CPUS" =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] ||
            die "SHARDSCOPE_S3_CPUS='${SHARDSCOPE_S3_CPUS}': comma-separated CPUs or ranges, such as 0 or 0-3"
        taskset -c "$SHARDSCOPE_S3_CPUS" true 2>/dev/null || die "SHARDSCOPE_S3_CPUS='${SHARDSCOPE_S3_CPUS}': not CPUs of this machine"
        on=(taskset -c "$SHARDSCOPE_S3_CPUS")
    fi
    if [ -z "$dir" ]; then
        dir=$(mktemp -d /tmp/shardscope-s3.XXXXXX)
        echo "$dir" >"$CURRENT"
    else
        [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || die "$dir exists and is not empty; start needs a fresh state directory"
        mkdir -p "$dir"
        dir=$(cd "$dir" && pwd)
    fi
    : >"$dir/$MARKER"
    mkdir -p "$dir"/{run,log,crash,mon,osd,rgw}
    trap 'fail_start "$dir" "start failed (line $LINENO)"' ERR

    fsid=$(uuidgen)
    mon_port=$(free_port)
    write_conf "$dir" "$fsid" "$mon_port"
    local c=(-c "$dir/ceph.conf")

    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >"$dir/log/setup.out" 2>&1
    ceph-mon "${c[@]}" -i a --mkfs --monmap "$dir/monmap" >>"$dir/log/setup.out" 2>&1
    "${on[@]}" ceph-mon "${c[@]}" -i a >>"$dir/log/setup.out" 2>&1

    osd_uuid=$(uuidgen)
    osd_id=$(timeout 30 ceph "${c[@]}" --connect-timeout 20 osd new "$osd_uuid" 2>>"$dir/log/setup.out")
    [ "$osd_id" = 0 ] || fail_start "$dir" "the monitor gave OSD id '$osd_id', expected 0"
    mkdir -p "$dir/osd/ceph-0"
    ceph-osd "${c[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$dir/log/setup.out" 2>&1
    "${on[@]}" ceph-osd "${c[@]}" -i 0 >>"$dir/log/setup.out" 2>&1

    rgw_port=$(free_port)
    "${on[@]}" radosgw "${c[@]}" -n client.rgw --rgw-frontends "beast endpoint=127.0.0.1:$rgw_port" >>"$dir/log/setup.out" 2>&1
    endpoint=http://127.0.0.1:$rgw_port

    # The gateway answers once it has created its pools and default zone, which needs the OSD up.
    for ((i = 0; i < READY_TIMEOUT * 5; i++)); do
        if curl -sf -o /dev/null --max-time 2 "$endpoint/"; then
            break
        fi
        pid_alive "$(cat "$dir/run/client.rgw.pid" 2>/dev/null || true)" || [ "$i" -lt 25 ] ||
            fail_start "$dir" "radosgw exited before answering on $endpoint"
        sleep 0.2
    done
    curl -sf -o /dev/null --max-time 2 "$endpoint/" ||
        fail_start "$dir" "radosgw did not answer on $endpoint within ${READY_TIMEOUT}s"

    access=$(openssl rand -hex 10 | tr a-f A-F)
    secret=$(openssl rand -hex 20)
    timeout 30 radosgw-admin "${c[@]}" user create --uid=shardscope --display-name=ShardScope \
        --access-key="$access" --secret-key="$secret" >>"$dir/log/setup.out" 2>&1
    trap - ERR

    # RGW's zonegroup is "default": GetBucketLocation answers it and CreateBucket accepts only it as
    # a LocationConstraint. SigV4 itself verifies with whatever region the client put in its
    # credential scope (docs/s3-testing.md).
    cat >"$dir/env.sh" <<EOF
export SHARDSCOPE_S3_ENDPOINT=$endpoint
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_DEFAULT_REGION=default
export SHARDSCOPE_S3_STATE=$dir
export SHARDSCOPE_S3_MEMSTORE_MIB=${SHARDSCOPE_S3_MEMSTORE_MIB:-2048}
EOF
    cat "$dir/env.sh"
    echo "s3-test-server: radosgw ready on $endpoint in $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")s; state in $dir" >&2
}

# Another radosgw of the cluster in DIR. A gateway keeps no state of its own (buckets, objects and
# multipart uploads live in RADOS), so killing this one is an outage a client sees while the data
# stays, as when a production gateway dies; the first gateway keeps serving the other tests.
cmd_gateway() {
    local dir=${1:-} port=${2:-} name endpoint i pid
    [ -n "$dir" ] && [ -f "$dir/$MARKER" ] && [ -f "$dir/env.sh" ] || die "gateway needs the state directory of a started server"
    [ -n "$port" ] || port=$(free_port)
    [[ "$port" =~ ^[0-9]+$ ]] || die "gateway: '$port' is not a port number"
    name=client.rgw-$port
    rm -f "$dir/run/$name.pid"
    radosgw -c "$dir/ceph.conf" -n "$name" --rgw-data "$dir/rgw" --rgw-thread-pool-size 32 \
        --rgw-frontends "beast endpoint=127.0.0.1:$port" >>"$dir/log/setup.out" 2>&1
    endpoint=http://127.0.0.1:$port
    for ((i = 0; i < READY_TIMEOUT * 5; i++)); do
        curl -sf -o /dev/null --max-time 2 "$endpoint/" && break
        sleep 0.2
    done
    curl -sf -o /dev/null --max-time 2 "$endpoint/" || die "the extra gateway did not answer on $endpoint"
    pid=$(cat "$dir/run/$name.pid")
    echo "$endpoint $pid"
}

case "${1:-}" in
start) cmd_start "${2:-}" ;;
gateway) cmd_gateway "${2:-}" "${3:-}" ;;
stop) cmd_stop "${2:-}" ;;
env) cmd_env "${2:-}" ;;
*)
    echo "usage: $0 start|stop|env [DIR] | gateway DIR [PORT]" >&2
    exit 2
    ;;
esac
