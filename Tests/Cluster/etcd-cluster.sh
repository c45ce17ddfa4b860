#!/usr/bin/env bash
# Starts or stops a local 3-member etcd cluster on 127.0.0.1 for the cluster-mode tests and
# benchmarks (Debian's etcd-server; nothing else is needed).
#
#   Tests/Cluster/etcd-cluster.sh start DIR [BASE_PORT [ETCD_FLAG...]]
#                                                         members 1..3: client ports BASE, BASE+1,
#                                                         BASE+2; peer ports BASE+10.. (default 23790);
#                                                         each member also gets the ETCD_FLAGs
#                                                         (say --max-txn-ops 1024)
#   Tests/Cluster/etcd-cluster.sh stop DIR                stops them (kill by the pids kept in DIR)
#   Tests/Cluster/etcd-cluster.sh member DIR N            starts member N again (after a kill)
#
# Prints the client endpoints, comma-separated, for `actorkvd --etcd`.
set -euo pipefail
command -v etcd >/dev/null || { echo "etcd-cluster.sh: etcd not found (apt-get install etcd-server)" >&2; exit 2; }
action="${1:?usage: etcd-cluster.sh start|stop|member DIR [BASE_PORT|N]}"
dir="${2:?usage: etcd-cluster.sh start|stop|member DIR [BASE_PORT|N]}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

base() { cat "$dir/base-port" 2>/dev/null || echo 23790; }
endpoints() { local b; b=$(base); echo "http://127.0.0.1:$b,http://127.0.0.1:$((b + 1)),http://127.0.0.1:$((b + 2))"; }

start_member() {
    local n="$1" b; b=$(base)
    local client=$((b + n - 1)) peer=$((b + 10 + n - 1))
    local cluster="m1=http://127.0.0.1:$((b + 10)),m2=http://127.0.0.1:$((b + 11)),m3=http://127.0.0.1:$((b + 12))"
    local state=new
    [ -d "$dir/m$n/member" ] && state=existing
    etcd --name "m$n" --data-dir "$dir/m$n" \
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "$cluster" --initial-cluster-state "$state" --initial-cluster-token actorkv-test \
        --heartbeat-interval 50 --election-timeout 500 --logger zap --log-level error \
        $(cat "$dir/extra-flags" 2>/dev/null) \
        >"$dir/m$n.log" 2>&1 &
    echo $! >"$dir/m$n.pid"
}

healthy() {
    local b; b=$(base)
    for port in $b $((b + 1)) $((b + 2)); do
        curl -sf -m 2 "http://127.0.0.1:$port/health" | grep -q '"health":"true"' && return 0
    done
    return 1
}

case "$action" in
start)
    echo "${3:-23790}" >"$dir/base-port"
    echo "${@:4}" >"$dir/extra-flags"
    for n in 1 2 3; do start_member "$n"; done
    for _ in $(seq 1 100); do healthy && { endpoints; exit 0; }; sleep 0.1; done
    echo "etcd-cluster.sh: the cluster did not become healthy; logs in $dir" >&2
    exit 1
    ;;
member)
    start_member "${3:?member number}"
    ;;
stop)
    for n in 1 2 3; do
        [ -f "$dir/m$n.pid" ] && kill -9 "$(cat "$dir/m$n.pid")" 2>/dev/null || true
    done
    ;;
*) echo "etcd-cluster.sh: unknown action '$action'" >&2; exit 2 ;;
esac
