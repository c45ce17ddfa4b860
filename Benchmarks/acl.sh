#!/usr/bin/env bash
# Namespace permissions' cost: PUT and GET at -P 16 and -P 1 from a client that is not the
# server's uid, against one actorkvd binary started without --acl and with a 100-rule --acl file
# (99 rules that do not match the client, then the one that grants it read and write on the
# benchmark's namespace), alternately, ROUNDS times (default 3); prints the median requests per
# second of each and their ratio (issue #24's target: with/without >= 0.95), and the median
# server CPU time per request (utime+stime from /proc, which a noisy machine disturbs less).
#
# Usage (as root: the client runs as uid 65534 through setpriv):
#     Benchmarks/acl.sh ACTORKVD [ROUNDS]
# Needs redis-benchmark (redis-tools) and setpriv (util-linux). Asserts nothing.
set -euo pipefail
BIN=$1 ROUNDS=${2:-3}
[ "$(id -u)" = 0 ] || { echo "acl.sh: run as root (the client must be another uid than the server's)" >&2; exit 2; }
V=$(printf 'v%.0s' $(seq 1 100))
WORK=$(mktemp -d /tmp/actorkv-acl.XXXXXX)
chmod 755 "$WORK"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
ACL="$WORK/acl.conf"
{
    echo "# 99 rules that do not match uid 65534 (or not the namespace 'bench'), then the one that does"
    for i in $(seq 1 33); do
        echo "uid:$((10000 + i))  team$i-*  read write"
        echo "gid:$((20000 + i))  shared$i  read"
        echo "*                 other$i   read"
    done
    echo "uid:65534  bench  read write"
} >"$ACL"
AS_CLIENT=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# rps MODE N PIPELINE COMMAND...: one redis-benchmark run (as uid 65534) against a fresh server.
rps() {
    local mode=$1 n=$2 p=$3; shift 3
    local dir; dir=$(mktemp -d "$WORK/s.XXXXXX"); chmod 755 "$dir"
    local acl=(); [ "$mode" = acl ] && acl=(--acl "$ACL")
    "$BIN" --socket "$dir/s.sock" --data-dir "$dir/data" --socket-mode 666 --compact-min-bytes 100000000000 "${acl[@]}" 2>"$dir/log" &
    local pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    if [ "$1" = GET ]; then  # something to read: fill the key space first
        "${AS_CLIENT[@]}" redis-benchmark -s "$dir/s.sock" -c 50 -n 200000 -r 100000 -P 16 -q PUT bench key:__rand_int__ "$V" >/dev/null 2>&1
    fi
    local before; before=$(cpu_ticks "$pid")
    local rate; rate=$("${AS_CLIENT[@]}" redis-benchmark -s "$dir/s.sock" -c 50 -n "$n" -r 100000 -P "$p" -q "$@" 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/')
    local after; after=$(cpu_ticks "$pid")
    echo "$rate $(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$n" 'BEGIN {printf "%.2f", t / hz / n * 1e6}')"
    # The requests really ran as the client (and were allowed): the namespace has keys.
    if ! printf 'COUNT bench\r\n' | nc -U -N "$dir/s.sock" | grep -q '^:[1-9]'; then
        echo "acl.sh: the benchmark's writes did not land (mode $mode)" >&2; exit 1
    fi
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); ACL file: $(grep -vc '^#' "$ACL") rules"
for spec in "16 PUT" "16 GET" "1 PUT" "1 GET"; do
    set -- $spec
    p=$1 cmd=$2 n=$([ "$1" = 16 ] && echo 600000 || echo 100000)
    args=(PUT bench key:__rand_int__ "$V"); [ "$cmd" = GET ] && args=(GET bench key:__rand_int__)
    plain=() acl=() plaincpu=() aclcpu=()
    for _ in $(seq 1 "$ROUNDS"); do
        read -r r c <<<"$(rps plain "$n" "$p" "${args[@]}")"; plain+=("$r"); plaincpu+=("$c")
        read -r r c <<<"$(rps acl "$n" "$p" "${args[@]}")"; acl+=("$r"); aclcpu+=("$c")
    done
    mp=$(median "${plain[@]}") ma=$(median "${acl[@]}")
    cp=$(median "${plaincpu[@]}") ca=$(median "${aclcpu[@]}")
    printf '%s -P %-2s  no ACL %8.0f rps %5.2f us/req  100-rule ACL %8.0f rps %5.2f us/req  ACL/none %.2f rps, %.2f CPU   (rps none: %s; ACL: %s)\n' \
        "$cmd" "$p" "$mp" "$cp" "$ma" "$ca" "$(awk -v a="$ma" -v b="$mp" 'BEGIN {print a / b}')" \
        "$(awk -v a="$ca" -v b="$cp" 'BEGIN {print a / b}')" "${plain[*]}" "${acl[*]}"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
