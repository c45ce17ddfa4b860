#!/usr/bin/env bash
# ActorKV benchmark suite: ActorKV against Redis 7 on the same machine, plus ActorKV's own write
# cost against store size (embedded, over the socket, and the seed LocalRepository pattern) and
# its latency during compaction. See Benchmarks/README.md.
#
#   Benchmarks/run.sh [--quick] [--out FILE] [--no-build] [--keep]
#
#   --quick     tiny sizes, one round (CI); asserts nothing about timings, exits 0 when everything
#               ran. Writes its report to a temp file unless --out is given.
#   --out FILE  where the Markdown report goes (default Benchmarks/BENCHMARKS.md in full mode);
#               the SVG chart goes next to it as throughput.svg.
#   --no-build  use the binaries already in .build-bench/release.
#   --keep      keep the temp directory (data dirs, server logs, raw results) for inspection.
#
# Builds release binaries into .build-bench (not .build, so it never collides with a developer's
# build), starts every server it needs itself in temp directories, and stops them all on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
QUICK=0 OUT="" BUILD=1 KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --out) [ $# -ge 2 ] || { echo "--out needs a file" >&2; exit 2; }; OUT=$2; shift ;;
        --no-build) BUILD=0 ;;
        --keep) KEEP=1 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

[ -x /opt/swift/usr/bin/swift ] && case ":$PATH:" in *:/opt/swift/usr/bin:*) ;; *) PATH=$PATH:/opt/swift/usr/bin ;; esac

# ---------------------------------------------------------------------------------------------
# Sizes. Full mode follows the issue; quick mode is small enough for CI on 2 cores.
if [ $QUICK = 1 ]; then
    MODE=quick ROUNDS=1
    TP_N=20000                    # redis-benchmark -n for the throughput runs
    ALWAYS_N1=200 ALWAYS_N50=2000 # fsync always: -c 1 and -c 50
    CONNECT_N=2000                # a new connection per request (-k 0)
    LOAD_KEYS=20000               # recovery and memory
    SIZES="1000 10000"            # write cost against store size
    SEED_SAVES="1000:20 10000:5"  # seed pattern: items:saves
    PUTS=500 ALWAYS_PUTS=100      # timed single puts per size (everysec / always)
    COMPACT_KEYS=20000
    RMW_UPDATES=10                # contended read-modify-write: successful updates per client
    STEP_TIMEOUT=180
else
    MODE=full ROUNDS=5            # ≥ 3; 5 because the shared machine is noisy
    TP_N=200000
    ALWAYS_N1=4000 ALWAYS_N50=60000  # a few hundred fsyncs per round at least: shorter rounds spread widely
    CONNECT_N=20000
    LOAD_KEYS=1000000
    SIZES="1000 100000 1000000"
    SEED_SAVES="1000:200 100000:20 1000000:3"
    PUTS=2000 ALWAYS_PUTS=500
    COMPACT_KEYS=1000000
    RMW_UPDATES=200
    STEP_TIMEOUT=1800
fi
TP_C=50 TP_R=100000
VALUE=$(printf 'v%.0s' $(seq 100))   # the 100-byte value, identical on both sides
[ ${#VALUE} = 100 ]

if [ -z "$OUT" ]; then
    if [ $QUICK = 1 ]; then OUT=$(mktemp -d /tmp/actorkv-bench-quick.XXXXXX)/BENCHMARKS.md
    else OUT=$HERE/BENCHMARKS.md; fi
fi
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
SVG=$(dirname "$OUT")/throughput.svg

BIN=$ROOT/.build-bench/release
# Data on the repository's disk (Benchmarks/out is git-ignored): /tmp may be a tmpfs, where fsync
# costs nothing. Sockets in a short /tmp path (a Unix socket path has at most 107 bytes).
mkdir -p "$HERE/out"
T=$(mktemp -d "$HERE/out/run.XXXXXX")
S=$(mktemp -d /tmp/akvb.XXXXXX)
chmod 700 "$T" "$S"
RESULTS=$T/results.txt CMDLOG=$T/commands.txt
: >"$RESULTS"; : >"$CMDLOG"

# ---------------------------------------------------------------------------------------------
# Bookkeeping: every server started is recorded and stopped on exit, even on failure.
PIDS=()
cleanup() {
    local status=$? pid
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    if [ $KEEP = 1 ] || [ $status != 0 ]; then
        echo "run.sh: temp files kept in $T (sockets in $S)" >&2
        [ $status != 0 ] && [ -d "$T" ] && tail -n 5 "$T"/*.log 2>/dev/null | sed 's/^/  /' >&2
    else
        rm -rf "$T"
    fi
    rm -rf "$S"
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }
put() { printf '%s=%s\n' "$1" "$2" >>"$RESULTS"; eval "R_$1=\$2"; }
get() { local v="R_$1"; printf '%s' "${!v:-n/a}"; }

# Records a command for the report, with temp paths and the value spelled symbolically.
logcmd() {
    local line="" arg
    for arg in "$@"; do
        case "$arg" in
            "") arg="''" ;;
            *[[:space:]]*) arg="'$arg'" ;;
        esac
        line+="${line:+ }$arg"
    done
    line=${line//$VALUE/\$V}; line=${line//$T/\$T}; line=${line//$S/\$S}; line=${line//$BIN/.build-bench/release}
    printf '%s\n' "$line" >>"$CMDLOG"
}

# Bounded run of a command, logged.
run() { logcmd "$@"; timeout "$STEP_TIMEOUT" "$@"; }

median() { printf '%s\n' "$@" | grep -v '^n/a$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a=="n/a" || b=="n/a" || b+0==0) print "n/a"; else printf "%.2f", a/b}'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo n/a; }
mib() { awk -v k="$1" 'BEGIN {if (k=="n/a") print "n/a"; else printf "%.0f", k/1024}'; }

# ---------------------------------------------------------------------------------------------
# 1. Build and tools.
if [ $BUILD = 1 ]; then
    say "building release binaries into .build-bench"
    for product in actorkvd actorkv-bench; do
        (cd "$ROOT" && timeout 3600 swift build -c release --scratch-path .build-bench --product $product) >"$T/build.log" 2>&1 \
            || { tail -n 30 "$T/build.log" >&2; die "swift build --product $product"; }
    done
fi
[ -x "$BIN/actorkvd" ] && [ -x "$BIN/actorkv-bench" ] || die "no binaries in $BIN (run without --no-build)"
AKVD=$BIN/actorkvd BENCH=$BIN/actorkv-bench

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
    say "installing redis-server and redis-tools"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    timeout 900 $SUDO apt-get update -qq && timeout 900 $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null \
        || die "apt-get install redis-server redis-tools"
fi

# ---------------------------------------------------------------------------------------------
# Servers. Each gets its own data directory under $T; PIDs go into PIDS for the exit trap.
AKV_PID="" REDIS_PID=""
AKV_SOCK=$S/akv.sock REDIS_SOCK=$S/redis.sock

start_akv() {  # data-dir fsync log [extra flags...]
    local dir=$1 fsync=$2 log=$3; shift 3
    rm -f "$AKV_SOCK"
    logcmd "$AKVD" --socket "$AKV_SOCK" --data-dir "$dir" --fsync "$fsync" "$@"
    AKV_START_NS=$(date +%s%N)
    "$AKVD" --socket "$AKV_SOCK" --data-dir "$dir" --fsync "$fsync" "$@" >>"$log" 2>&1 &
    AKV_PID=$!; PIDS+=("$AKV_PID")
    AKV_READY_MS=$(timeout "$STEP_TIMEOUT" "$BENCH" wait-ping --socket "$AKV_SOCK" --since-ns "$AKV_START_NS" \
        --timeout "$STEP_TIMEOUT" --interval-us 500 | sed -n 's/.*ready_ms=\([0-9.]*\).*/\1/p') || true
    [ -n "$AKV_READY_MS" ] || die "actorkvd did not answer PING (log: $log)"
}

start_redis() {  # data-dir appendfsync log
    local dir=$1 fsync=$2 log=$3
    mkdir -p "$dir"; rm -f "$REDIS_SOCK"
    local args=(--port 0 --unixsocket "$REDIS_SOCK" --unixsocketperm 700 --appendonly yes --appendfsync "$fsync" --save '' --dir "$dir")
    logcmd redis-server "${args[@]}"
    REDIS_START_NS=$(date +%s%N)
    redis-server "${args[@]}" >>"$log" 2>&1 &
    REDIS_PID=$!; PIDS+=("$REDIS_PID")
    REDIS_READY_MS=$(timeout "$STEP_TIMEOUT" "$BENCH" wait-ping --socket "$REDIS_SOCK" --since-ns "$REDIS_START_NS" \
        --timeout "$STEP_TIMEOUT" --interval-us 500 | sed -n 's/.*ready_ms=\([0-9.]*\).*/\1/p') || true
    [ -n "$REDIS_READY_MS" ] || die "redis-server did not answer PING (log: $log)"
}

wait_exit() {  # pid what
    # Polled every 5 ms: the stop rows time this wait (at 100 ms a poll, an exit taking 30 ms
    # read as 100+).
    local i
    for i in $(seq $((STEP_TIMEOUT * 200))); do kill -0 "$1" 2>/dev/null || break; sleep 0.005; done
    kill -0 "$1" 2>/dev/null && die "$2 (pid $1) did not exit"
    wait "$1" 2>/dev/null || die "$2 (pid $1) exited with status $?"
    # Forget it, so that the exit trap never signals a recycled pid.
    local keep=() p
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

stop_akv() {
    [ -n "$AKV_PID" ] || return 0
    logcmd kill -TERM '<actorkvd pid>'
    local t0; t0=$(date +%s%N)
    kill -TERM "$AKV_PID"; wait_exit "$AKV_PID" actorkvd
    AKV_STOP_MS=$(( ($(date +%s%N) - t0) / 1000000 )); AKV_PID=""
}

stop_redis() {
    [ -n "$REDIS_PID" ] || return 0
    logcmd redis-cli -s "$REDIS_SOCK" shutdown
    local t0; t0=$(date +%s%N)
    timeout "$STEP_TIMEOUT" redis-cli -s "$REDIS_SOCK" shutdown >/dev/null 2>&1 || true
    wait_exit "$REDIS_PID" redis-server
    REDIS_STOP_MS=$(( ($(date +%s%N) - t0) / 1000000 )); REDIS_PID=""
}

akv_cli() { timeout 60 redis-cli -s "$AKV_SOCK" "$@"; }
redis_cli() { timeout 60 redis-cli -s "$REDIS_SOCK" "$@"; }

# redis-benchmark with the given socket and extra arguments; prints "rps p50_ms p99_ms".
bench_rps() {
    local sock=$1; shift
    logcmd redis-benchmark -s "$sock" --csv "$@"
    local line
    line=$(timeout "$STEP_TIMEOUT" redis-benchmark -s "$sock" --csv "$@" 2>>"$T/redis-benchmark.log" | tail -n 1) \
        || die "redis-benchmark $* on $sock"
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    printf '%s\n' "$line" | tr -d '"' | awk -F, 'NF >= 8 && $2+0 > 0 {print $2, $5, $7; ok=1} END {exit !ok}' \
        || die "no result from redis-benchmark $* (got: $line)"
}

# Runs one throughput comparison ROUNDS times, alternating ActorKV and Redis; stores the medians.
#   compare NAME "redis-benchmark flags" "ActorKV command" "Redis command"
compare() {
    local name=$1 flags=$2 akvcmd=$3 rediscmd=$4 round a r
    local akv_rps=() akv_p99=() redis_rps=() redis_p99=()
    for round in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086
        a=$(bench_rps "$AKV_SOCK" $flags $akvcmd)
        # shellcheck disable=SC2086
        r=$(bench_rps "$REDIS_SOCK" $flags $rediscmd)
        set -- $a; akv_rps+=("$1"); akv_p99+=("$3")
        set -- $r; redis_rps+=("$1"); redis_p99+=("$3")
        say "  $name round $round: ActorKV $(echo $a | cut -d' ' -f1) rps, Redis $(echo $r | cut -d' ' -f1) rps"
    done
    put "${name}_akv_rps" "$(median "${akv_rps[@]}")"
    put "${name}_redis_rps" "$(median "${redis_rps[@]}")"
    put "${name}_akv_p99" "$(median "${akv_p99[@]}")"
    put "${name}_redis_p99" "$(median "${redis_p99[@]}")"
    put "${name}_akv_all" "${akv_rps[*]}"
    put "${name}_redis_all" "${redis_rps[*]}"
}

# ---------------------------------------------------------------------------------------------
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
RUN_T0=$(date +%s)
say "mode $MODE; load average $LOAD_START; temp $T"

# 3. Throughput, fsync everysec.
say "throughput: -c $TP_C -n $TP_N -r $TP_R, $ROUNDS round(s), ActorKV and Redis alternating"
start_akv "$T/tp-akv" everysec "$T/akv-throughput.log"
start_redis "$T/tp-redis" everysec "$T/redis-throughput.log"
for P in 1 16; do
    F="-c $TP_C -n $TP_N -r $TP_R -P $P"
    compare "put_p$P" "$F" "PUT bench key:__rand_int__ $VALUE" "SET key:__rand_int__ $VALUE"
    [ "$(akv_cli COUNT bench)" -gt 0 ] || die "ActorKV holds no keys after the PUT benchmark"
    [ "$(redis_cli DBSIZE)" -gt 0 ] || die "Redis holds no keys after the SET benchmark"
    compare "get_p$P" "$F" "GET bench key:__rand_int__" "GET key:__rand_int__"
done
# A new connection for every request, as a shell script running nc or redis-cli per command does.
compare "connect_c1" "-k 0 -c 1 -n $CONNECT_N -r $TP_R" "GET bench key:__rand_int__" "GET key:__rand_int__"
compare "connect_c$TP_C" "-k 0 -c $TP_C -n $CONNECT_N -r $TP_R" "GET bench key:__rand_int__" "GET key:__rand_int__"
put tp_keys_akv "$(akv_cli COUNT bench)"
put tp_keys_redis "$(redis_cli DBSIZE)"

# Issue #18: counters and versions. INCR on random keys (ActorKV's namespace and Redis's database
# already hold the key:… keys above; the counters are counter:…), then ONE key incremented by
# $TP_C clients with read → modify → conditional write, retrying on conflict.
say "counters: INCR -c $TP_C -P 1|16; contended read-modify-write, $TP_C clients × $RMW_UPDATES updates"
for P in 1 16; do
    compare "incr_p$P" "-c $TP_C -n $TP_N -r $TP_R -P $P" "INCR bench counter:__rand_int__" "INCR counter:__rand_int__"
done
# redis-benchmark counts any reply as a completed request: check that every INCR was applied
# (the counters add up to the number sent) on both servers.
INCR_SENT=$((2 * ROUNDS * TP_N))
for target in akv redis; do
    [ $target = akv ] && sock=$AKV_SOCK || sock=$REDIS_SOCK
    line=$(run "$BENCH" sum-counters --socket "$sock" --target $target --ns bench --prefix counter:) || die "sum-counters $target"
    sum=$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^sum=//p')
    [ "$sum" = "$INCR_SENT" ] || die "the INCR counters on $target add up to $sum, not the $INCR_SENT INCRs sent ($line)"
    put "incr_keys_$target" "$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^keys=//p')"
done
# Alternating rounds, as compare does. contended-update itself fails (and so the run) if the
# counter's final value is not the number of successful updates: a lost update in either server.
rmw_akv=() rmw_redis=() rmw_akv_retries=() rmw_redis_retries=()
for round in $(seq "$ROUNDS"); do
    for target in akv redis; do
        [ $target = akv ] && sock=$AKV_SOCK || sock=$REDIS_SOCK
        line=$(run "$BENCH" contended-update --socket "$sock" --target $target --ns bench --key counter \
            --clients "$TP_C" --updates-per-client "$RMW_UPDATES") || die "contended-update $target (round $round): see the message above"
        put "rmw_${target}_line_$round" "$line"
        rate=$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^updates_per_s=//p')
        retries=$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^retries_per_success=//p')
        [ -n "$rate" ] && [ -n "$retries" ] || die "no result from contended-update $target (got: $line)"
        if [ $target = akv ]; then rmw_akv+=("$rate") rmw_akv_retries+=("$retries")
        else rmw_redis+=("$rate") rmw_redis_retries+=("$retries"); fi
    done
    say "  contended RMW round $round: ActorKV ${rmw_akv[-1]} updates/s (${rmw_akv_retries[-1]} retries each), Redis ${rmw_redis[-1]} updates/s (${rmw_redis_retries[-1]} retries each)"
done
put rmw_akv_rps "$(median "${rmw_akv[@]}")"
put rmw_redis_rps "$(median "${rmw_redis[@]}")"
put rmw_akv_retries "$(median "${rmw_akv_retries[@]}")"
put rmw_redis_retries "$(median "${rmw_redis_retries[@]}")"
put rmw_akv_all "${rmw_akv[*]}"
put rmw_redis_all "${rmw_redis[*]}"
put rmw_akv_retries_all "${rmw_akv_retries[*]}"
put rmw_redis_retries_all "${rmw_redis_retries[*]}"
# Once more for Redis with each of its five commands a round trip of its own (as a client that does
# not pipeline its transaction): for reference only, the target's ratio is against the run above.
line=$(run "$BENCH" contended-update --socket "$REDIS_SOCK" --target redis --key counter \
    --clients "$TP_C" --updates-per-client "$RMW_UPDATES" --redis-pipeline no) || die "contended-update redis --redis-pipeline no: see the message above"
put rmw_redis5_line "$line"
put rmw_redis5_rps "$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^updates_per_s=//p')"
put rmw_redis5_retries "$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^retries_per_success=//p')"
say "  contended RMW, Redis without pipelining (one run): $(get rmw_redis5_rps) updates/s ($(get rmw_redis5_retries) retries each)"

# 4. Writes with an fsync before every acknowledgement.
say "fsync always: restarting both, writes at -c 1 and -c $TP_C"
stop_akv; stop_redis
start_akv "$T/tp-akv" always "$T/akv-always.log"
start_redis "$T/tp-redis" always "$T/redis-always.log"
compare "always_c1" "-c 1 -n $ALWAYS_N1 -r $TP_R -P 1" "PUT bench key:__rand_int__ $VALUE" "SET key:__rand_int__ $VALUE"
compare "always_c$TP_C" "-c $TP_C -n $ALWAYS_N50 -r $TP_R -P 1" "PUT bench key:__rand_int__ $VALUE" "SET key:__rand_int__ $VALUE"
stop_akv; stop_redis

# 5. Recovery and memory.
say "recovery and memory: loading $LOAD_KEYS keys into each"
run "$BENCH" gen-resp --target akv --keys "$LOAD_KEYS" --out "$T/load-akv.resp" || die "gen-resp akv"
run "$BENCH" gen-resp --target redis --keys "$LOAD_KEYS" --out "$T/load-redis.resp" || die "gen-resp redis"
start_akv "$T/rec-akv" everysec "$T/akv-recovery.log"
start_redis "$T/rec-redis" everysec "$T/redis-recovery.log"
put rss_empty_akv "$(rss_kib "$AKV_PID")"
put rss_empty_redis "$(rss_kib "$REDIS_PID")"

pipe_load() {  # name socket file
    logcmd redis-cli -s "$2" --pipe '<' "$3"
    local t0 t1 out
    t0=$(date +%s%N)
    out=$(timeout "$STEP_TIMEOUT" redis-cli -s "$2" --pipe <"$3" 2>&1) || die "redis-cli --pipe into $1: $out"
    t1=$(date +%s%N)
    printf '%s\n' "$out" | grep -q "errors: 0, replies: $LOAD_KEYS" || die "redis-cli --pipe into $1: $out"
    put "load_s_$1" "$(awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f", d/1e9}')"
}
pipe_load akv "$AKV_SOCK" "$T/load-akv.resp"
pipe_load redis "$REDIS_SOCK" "$T/load-redis.resp"
[ "$(akv_cli COUNT bench)" = "$LOAD_KEYS" ] || die "ActorKV COUNT after load is $(akv_cli COUNT bench)"
[ "$(redis_cli DBSIZE)" = "$LOAD_KEYS" ] || die "Redis DBSIZE after load is $(redis_cli DBSIZE)"
# Let background work settle: Redis's AOF rewrite (a fork) and the everysec fsyncs.
for _ in $(seq 600); do
    redis_cli INFO persistence | grep -q '^aof_rewrite_in_progress:0' && break; sleep 0.1
done
sleep 2
put rss_loaded_akv "$(rss_kib "$AKV_PID")"
put rss_loaded_redis "$(rss_kib "$REDIS_PID")"

# Single-connection latency with the store loaded (a reference for section 6's socket figures).
# A few thousand round trips are a fraction of a second, so one pair of runs is mostly noise
# (p50 15-47 us for either server, seen on one idle machine): alternate ROUNDS times, medians.
c1_akv_p50=() c1_akv_p99=() c1_redis_p50=() c1_redis_p99=()
for _ in $(seq "$ROUNDS"); do
    set -- $(bench_rps "$AKV_SOCK" -c 1 -n "$PUTS" -r "$LOAD_KEYS" -P 1 PUT bench key:__rand_int__ "$VALUE")
    c1_akv_p50+=("$2"); c1_akv_p99+=("$3")
    set -- $(bench_rps "$REDIS_SOCK" -c 1 -n "$PUTS" -r "$LOAD_KEYS" -P 1 SET key:__rand_int__ "$VALUE")
    c1_redis_p50+=("$2"); c1_redis_p99+=("$3")
done
put c1_akv_p50 "$(median "${c1_akv_p50[@]}")"; put c1_akv_p99 "$(median "${c1_akv_p99[@]}")"
put c1_redis_p50 "$(median "${c1_redis_p50[@]}")"; put c1_redis_p99 "$(median "${c1_redis_p99[@]}")"
put c1_akv_p50_all "${c1_akv_p50[*]}"; put c1_redis_p50_all "${c1_redis_p50[*]}"

put disk_akv "$(du -sk "$T/rec-akv" | cut -f1)"
put disk_redis "$(du -sk "$T/rec-redis" | cut -f1)"

say "  restarting ActorKV"
stop_akv; put stop_ms_akv "$AKV_STOP_MS"
start_akv "$T/rec-akv" everysec "$T/akv-restart.log"
put restart_ms_akv "$AKV_READY_MS"
put rss_restart_akv "$(rss_kib "$AKV_PID")"
[ "$(akv_cli COUNT bench)" = "$LOAD_KEYS" ] || die "ActorKV COUNT after restart is $(akv_cli COUNT bench)"
put akv_open_line "$(grep -o 'namespace bench: opened:.*' "$T/akv-restart.log" | head -n 1)"
# Again after a compaction, so that the restart loads a snapshot instead of replaying the log.
logcmd redis-cli -s "$AKV_SOCK" COMPACT bench
[ "$(akv_cli COMPACT bench)" = OK ] || die "COMPACT bench failed"
stop_akv
start_akv "$T/rec-akv" everysec "$T/akv-restart2.log"
put restart2_ms_akv "$AKV_READY_MS"
put rss_restart2_akv "$(rss_kib "$AKV_PID")"
[ "$(akv_cli COUNT bench)" = "$LOAD_KEYS" ] || die "ActorKV COUNT after the second restart is $(akv_cli COUNT bench)"
put akv_open_line2 "$(grep -o 'namespace bench: opened:.*' "$T/akv-restart2.log" | head -n 1)"
stop_akv

say "  restarting Redis"
stop_redis; put stop_ms_redis "$REDIS_STOP_MS"
start_redis "$T/rec-redis" everysec "$T/redis-restart.log"
put restart_ms_redis "$REDIS_READY_MS"
put rss_restart_redis "$(rss_kib "$REDIS_PID")"
[ "$(redis_cli DBSIZE)" = "$LOAD_KEYS" ] || die "Redis DBSIZE after restart is $(redis_cli DBSIZE)"
put redis_loaded_lines "$(grep -o 'DB loaded from.*' "$T/redis-restart.log" | paste -sd ';' - | sed 's/;/; /g')"
put redis_loaded_s "$(grep -o 'DB loaded from append only file: [0-9.]* seconds' "$T/redis-restart.log" | grep -o '[0-9.]* seconds' | cut -d' ' -f1 | tail -n 1)"
# Again after an AOF rewrite (Redis's compaction: the base file becomes one RDB).
logcmd redis-cli -s "$REDIS_SOCK" BGREWRITEAOF
redis_cli BGREWRITEAOF >/dev/null || die "BGREWRITEAOF failed"
for _ in $(seq $((STEP_TIMEOUT * 10))); do
    info=$(redis_cli INFO persistence)
    printf '%s\n' "$info" | grep -q '^aof_rewrite_in_progress:0' && printf '%s\n' "$info" | grep -q '^aof_rewrite_scheduled:0' && break
    sleep 0.1
done
stop_redis
start_redis "$T/rec-redis" everysec "$T/redis-restart2.log"
put restart2_ms_redis "$REDIS_READY_MS"
put rss_restart2_redis "$(rss_kib "$REDIS_PID")"
[ "$(redis_cli DBSIZE)" = "$LOAD_KEYS" ] || die "Redis DBSIZE after the second restart is $(redis_cli DBSIZE)"
put redis_loaded_lines2 "$(grep -o 'DB loaded from.*' "$T/redis-restart2.log" | paste -sd ';' - | sed 's/;/; /g')"
stop_redis
rm -f "$T/load-akv.resp" "$T/load-redis.resp"

# 6. Write cost against store size.
say "write cost against store size: $SIZES keys"
for n in $SIZES; do
    line=$(run "$BENCH" embedded-latency --dir "$T/emb-$n" --keys "$n" --puts "$PUTS" --fsync everysec) || die "embedded-latency $n"
    put "emb_$n" "$line"; rm -rf "$T/emb-$n"
    line=$(run "$BENCH" embedded-latency --dir "$T/emba-$n" --keys "$n" --puts "$ALWAYS_PUTS" --fsync always) || die "embedded-latency always $n"
    put "emba_$n" "$line"; rm -rf "$T/emba-$n"
    line=$(run "$BENCH" map-latency --keys "$n" --puts 20000) || die "map-latency $n"
    put "map_$n" "$line"
    say "  embedded $n keys done"
done
# The engine issue's target is a ratio of two p50s measured seconds apart; on a shared machine
# the drift between two single runs moves it by ±0.3. So the smallest and largest sizes are also
# measured in alternating rounds, each round giving its own ratio.
SMALL=${SIZES%% *} LARGE=${SIZES##* }
small_p50=() large_p50=() size_ratios=()
for round in $(seq "$ROUNDS"); do
    small=$(run "$BENCH" embedded-latency --dir "$T/embr-s" --keys "$SMALL" --puts "$PUTS" --fsync everysec) || die "embedded-latency $SMALL"
    rm -rf "$T/embr-s"
    large=$(run "$BENCH" embedded-latency --dir "$T/embr-l" --keys "$LARGE" --puts "$PUTS" --fsync everysec) || die "embedded-latency $LARGE"
    rm -rf "$T/embr-l"
    sp=$(printf '%s\n' "$small" | tr ' ' '\n' | sed -n 's/^p50_us=//p') lp=$(printf '%s\n' "$large" | tr ' ' '\n' | sed -n 's/^p50_us=//p')
    small_p50+=("$sp") large_p50+=("$lp") size_ratios+=("$(ratio "$lp" "$sp")")
done
put emb_rounds_small "${small_p50[*]}"
put emb_rounds_large "${large_p50[*]}"
put emb_rounds_ratios "${size_ratios[*]}"
put emb_rounds_ratio "$(median "${size_ratios[@]}")"
say "  alternating rounds: p50 ratio $(get emb_rounds_ratio) (${size_ratios[*]})"
start_akv "$T/lat-akv" everysec "$T/akv-latency.log" --snapshot-interval 0
for n in $SIZES; do
    line=$(run "$BENCH" socket-latency --socket "$AKV_SOCK" --ns "lat$n" --keys "$n" --puts "$PUTS") || die "socket-latency $n"
    put "sock_$n" "$line"
done
put rss_latency_akv "$(rss_kib "$AKV_PID")"
stop_akv
say "  socket done; seed pattern"
for spec in $SEED_SAVES; do
    n=${spec%:*} saves=${spec#*:}
    line=$(run "$BENCH" seed-latency --dir "$T/seed-$n" --items "$n" --saves "$saves") || die "seed-latency $n"
    put "seed_$n" "$line"; rm -rf "$T/seed-$n"
    say "  seed $n items done"
done

# 7. Latency during compaction.
say "latency during compaction: $COMPACT_KEYS keys"
line=$(run "$BENCH" compaction-latency --dir "$T/compact" --keys "$COMPACT_KEYS" --puts "$PUTS") || die "compaction-latency"
put compaction "$line"; rm -rf "$T/compact"

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
RUN_SECONDS=$(( $(date +%s) - RUN_T0 ))

# ---------------------------------------------------------------------------------------------
# 8. Report.
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }  # field LINE NAME
rps() { awk -v x="$1" 'BEGIN {if (x=="n/a") print "n/a"; else printf "%.0f", x}'; }
us() {  # microseconds, human: 12.3 µs / 4.5 ms / 1.2 s
    awk -v x="$1" 'BEGIN {if (x=="" || x=="n/a") print "n/a"; else if (x < 1000) printf "%.3g µs", x; else if (x < 1e6) printf "%.3g ms", x/1000; else printf "%.3g s", x/1e6}'
}
ms() { awk -v x="$1" 'BEGIN {if (x=="" || x=="n/a") print "n/a"; else if (x < 1000) printf "%.3g ms", x; else printf "%.3g s", x/1000}'; }
keys_label() { awk -v n="$1" 'BEGIN {if (n>=1000000) printf "%gM", n/1e6; else if (n>=1000) printf "%gk", n/1e3; else print n}'; }

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEM=$(awk '/^MemTotal:/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
SWIFT_V=$(swift --version 2>&1 | grep -m1 -i 'swift version' || echo unknown)
REDIS_V=$(redis-server --version)
BENCH_V=$(redis-benchmark --version 2>/dev/null || echo unknown)
AKV_V=$("$AKVD" --version)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -vc '^??' || true)
FS=$(df -T "$T" | awk 'NR==2 {print $2 " on " $1}')

row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4"; }
tp_row() {  # label name
    local a b; a=$(get "${2}_akv_rps") b=$(get "${2}_redis_rps")
    row "$1" "$(rps "$a") rps (p99 $(get "${2}_akv_p99") ms)" "$(rps "$b") rps (p99 $(get "${2}_redis_p99") ms)" "**$(ratio "$a" "$b")**"
}
lower_row() {  # label akv redis unit-formatter
    row "$1" "$($4 "$2")" "$($4 "$3")" "$(ratio "$2" "$3")"
}
mib_s() { [ "$1" = n/a ] && echo n/a || echo "$(mib "$1") MiB"; }
rmw_row() {
    local a b; a=$(get rmw_akv_rps) b=$(get rmw_redis_rps)
    row "contended read-modify-write of one key, $TP_C clients × $RMW_UPDATES updates (successful updates/s; issue #18 target: ≥ 2.0)" \
        "$(rps "$a") updates/s ($(get rmw_akv_retries) retries per success)" \
        "$(rps "$b") updates/s ($(get rmw_redis_retries) retries per success)" "**$(ratio "$a" "$b")**"
}
target_row() {  # label akv redis target
    local r met; r=$(ratio "$2" "$3")
    if [ $QUICK = 1 ]; then met="not judged (quick mode)"
    elif [ "$r" = n/a ]; then met=n/a
    else met=$(awk -v r="$r" -v t="$4" 'BEGIN {print (r + 0 >= t + 0) ? "yes" : "no"}'); fi
    row "$1" "**$r**" "≥ $4" "$met"
}
sec_s() { [ "$1" = n/a ] && echo n/a || echo "$1 s"; }

{
cat <<EOF
# ActorKV benchmarks

Generated by \`Benchmarks/run.sh$( [ $QUICK = 1 ] && echo ' --quick')\` ($MODE mode) on $DATE in ${RUN_SECONDS} s.
ActorKV (\`actorkvd\`, fsync \`everysec\` unless stated) against Redis 7 (AOF, \`appendfsync everysec\`
unless stated), both on Unix sockets on the same machine, driven by the same \`redis-benchmark\`.

> **Noise warning.** This machine is shared with other engineers compiling at the same time
> (load average at the start of the run: **$LOAD_START**, at the end: $LOAD_END, on $(nproc) cores).
> Client, servers and compilers compete for $(nproc) cores, so absolute figures are noisy and
> pessimistic for both servers; the ActorKV / Redis ratios, measured in alternating rounds, are
> the more meaningful numbers. Re-run on an idle machine before quoting them.

## Machine and versions

| | |
| --- | --- |
| CPU | $CPU ($(nproc) cores online, \`nproc\`) |
| memory | $MEM |
| kernel | $(uname -sr) |
| data filesystem | $FS |
| load average (1/5/15 min) | start $LOAD_START, end $LOAD_END |
| Swift | $SWIFT_V |
| ActorKV | $AKV_V, commit $COMMIT ($DIRTY files modified in the working tree), release build (\`.build-bench\`) |
| Redis | $REDIS_V |
| redis-benchmark | $BENCH_V |

## ActorKV against Redis

Throughput rows: requests per second, the median of $ROUNDS round(s) run alternately (ActorKV,
Redis, ActorKV, Redis, …), with the median of the rounds' p99 latency as redis-benchmark reports it;
the ratio is ActorKV / Redis (**above 1: ActorKV faster**). Memory and time rows: lower is
better, so a ratio above 1 means ActorKV uses more.

| benchmark | ActorKV | Redis 7 | ActorKV / Redis |
| --- | --- | --- | --- |
EOF
tp_row "PUT vs SET, -c $TP_C -P 1, 100-byte values (everysec)" put_p1
tp_row "GET, -c $TP_C -P 1" get_p1
tp_row "PUT vs SET, -c $TP_C -P 16" put_p16
tp_row "GET, -c $TP_C -P 16" get_p16
tp_row "INCR (random keys), -c $TP_C -P 1 (issue #18 target: ≥ 1.0)" incr_p1
tp_row "INCR (random keys), -c $TP_C -P 16 (issue #18 target: ≥ 1.0)" incr_p16
rmw_row
tp_row "GET on a new connection per request (-k 0), -c 1 (-n $CONNECT_N)" connect_c1
tp_row "GET on a new connection per request (-k 0), -c $TP_C (-n $CONNECT_N)" "connect_c$TP_C"
tp_row "PUT vs SET, fsync always, -c 1 (-n $ALWAYS_N1)" always_c1
tp_row "PUT vs SET, fsync always, -c $TP_C (-n $ALWAYS_N50)" "always_c$TP_C"
lower_row "bulk load of $(keys_label $LOAD_KEYS) keys via \`redis-cli --pipe\` (s)" "$(get load_s_akv)" "$(get load_s_redis)" sec_s
lower_row "VmRSS, empty server" "$(get rss_empty_akv)" "$(get rss_empty_redis)" mib_s
lower_row "VmRSS after loading $(keys_label $LOAD_KEYS) keys" "$(get rss_loaded_akv)" "$(get rss_loaded_redis)" mib_s
lower_row "data directory size after loading" "$(get disk_akv)" "$(get disk_redis)" mib_s
lower_row "stop (SIGTERM / SHUTDOWN) to exit" "$(get stop_ms_akv)" "$(get stop_ms_redis)" ms
lower_row "restart: process start to first +PONG" "$(get restart_ms_akv)" "$(get restart_ms_redis)" ms
lower_row "VmRSS after restart" "$(get rss_restart_akv)" "$(get rss_restart_redis)" mib_s
lower_row "restart after \`COMPACT\` / \`BGREWRITEAOF\`: start to first +PONG" "$(get restart2_ms_akv)" "$(get restart2_ms_redis)" ms
lower_row "VmRSS after that restart" "$(get rss_restart2_akv)" "$(get rss_restart2_redis)" mib_s
lower_row "single-connection write p50 at $(keys_label $LOAD_KEYS) keys (redis-benchmark -c 1 -n $PUTS, median of $ROUNDS, ms)" "$(get c1_akv_p50)" "$(get c1_redis_p50)" ms
lower_row "single-connection write p99 at $(keys_label $LOAD_KEYS) keys (redis-benchmark -c 1 -n $PUTS, median of $ROUNDS, ms)" "$(get c1_akv_p99)" "$(get c1_redis_p99)" ms

cat <<EOF

Every round's figures (rps), ActorKV / Redis:
EOF
for name in put_p1 get_p1 put_p16 get_p16 incr_p1 incr_p16 connect_c1 "connect_c$TP_C" always_c1 "always_c$TP_C"; do
    echo "- \`$name\`: $(get "${name}_akv_all") / $(get "${name}_redis_all")"
done
echo "- contended read-modify-write (successful updates/s): $(get rmw_akv_all) / $(get rmw_redis_all); retries per success: $(get rmw_akv_retries_all) / $(get rmw_redis_retries_all)"
echo "- single-connection write p50 (ms): $(get c1_akv_p50_all) / $(get c1_redis_p50_all)"
cat <<EOF

Redis's own account of the restart: \`$(get redis_loaded_lines)\`; after \`BGREWRITEAOF\`:
\`$(get redis_loaded_lines2)\`.
ActorKV's: \`$(get akv_open_line)\`; after \`COMPACT\`: \`$(get akv_open_line2)\`.

![ActorKV / Redis throughput](throughput.svg)

## Counters and conditional writes (issue #18)

**INCR**: \`redis-benchmark -c $TP_C -n $TP_N -r $TP_R -P 1|16\`, \`INCR bench counter:__rand_int__\` against
\`INCR counter:__rand_int__\`, in the same alternating rounds as the rows above. Since redis-benchmark
counts an error reply as a completed request, \`actorkv-bench sum-counters\` then checks on each server
that the counters add up to the $INCR_SENT INCRs sent ($(get incr_keys_akv) / $(get incr_keys_redis) distinct keys).

**Contended read-modify-write**: \`actorkv-bench contended-update\`, $TP_C threads, each with its own
connection, increment ONE key until each has made $RMW_UPDATES successful updates, retrying on conflict.
ActorKV: \`GETV bench counter\` (value and version; absent: 0 and version 0), then
\`PUT bench counter <n+1> IFVERSION <v>\` (\`:version\`, or \`\$-1\` on conflict). Redis: \`WATCH counter\` and
\`GET counter\`, then \`MULTI\`, \`SET counter <n+1>\`, \`EXEC\` (\`*-1\` on conflict). Each side sends together
the commands whose replies it does not need before the next ones (WATCH with GET; MULTI, SET and EXEC),
so both make two round trips per attempt. Successful updates per second are counted from the moment
all $TP_C are connected to the last one's finish; retries per success is conflicts / successes. The
counter is deleted before each run, and each run fails the benchmark unless its final value equals
its number of successful updates (a lost or doubled update on either server). Medians of $ROUNDS
alternating round(s).
For reference only (one run, not the target's comparison): Redis with each of the five commands a
round trip of its own (\`--redis-pipeline no\`, as a client that does not pipeline its transaction)
made $(rps "$(get rmw_redis5_rps)") updates/s with $(get rmw_redis5_retries) retries per success;
ActorKV's median is $(ratio "$(get rmw_akv_rps)" "$(get rmw_redis5_rps)")× that.

| benchmark | ActorKV / Redis | issue #18 target | at target |
| --- | --- | --- | --- |
EOF
target_row "INCR, -c $TP_C -P 1" "$(get incr_p1_akv_rps)" "$(get incr_p1_redis_rps)" 1.0
target_row "INCR, -c $TP_C -P 16" "$(get incr_p16_akv_rps)" "$(get incr_p16_redis_rps)" 1.0
target_row "contended read-modify-write, successful updates/s" "$(get rmw_akv_rps)" "$(get rmw_redis_rps)" 2.0
cat <<EOF

The targets are reported, never asserted: only the counter checks can fail the run.

## Write cost against store size (ActorKV only)

Single writes of 100-byte values, alternating a new key (landing at a random position in key
order) and an overwrite of a random existing key, after filling the namespace to the given size
(in batches, then \`compact()\`, so the log is empty when timing starts). Automatic compaction is
off while timing (it has its own section below).
**Embedded**: \`Namespace.put\` in this process. **Socket**: sequential \`PUT\`s on one connection
to \`actorkvd\` (round trip included). **Seed pattern**: \`SeedLocalRepository.save\`, the
swift-actor-persistence \`LocalRepository\` re-implemented in \`Benchmarks/Sources/actorkv-bench/SeedLocalRepository.swift\`,
which re-encodes the whole collection as JSON and rewrites the file on every save (on Linux,
Foundation's \`.atomic\` write also fsyncs the temporary file, so a save is durable like ActorKV's \`always\`).
**Map only**: \`OrderedMap.updateValue\` alone with the same keys (\`actorkv-bench map-latency\`, 20,000
updates, no actor, no log): the share of a put that grows with the store.

| keys | embedded, everysec: p50 / p99 (new key p50) | map only: p50 / p99 | embedded, always: p50 / p99 | socket, everysec: p50 / p99 | seed pattern save: p50 / p99 (saves) | seed p50 / ActorKV embedded always p50 |
| --- | --- | --- | --- | --- | --- | --- |
EOF
for n in $SIZES; do
    e=$(get "emb_$n") ea=$(get "emba_$n") so=$(get "sock_$n") m=$(get "map_$n")
    seedline=$(get "seed_$n")
    if [ "$seedline" = n/a ]; then seedcell="not run"; sr=n/a
    else
        seedcell="$(us "$(field "$seedline" p50_us)") / $(us "$(field "$seedline" p99_us)") ($(field "$seedline" n))"
        sr=$(ratio "$(field "$seedline" p50_us)" "$(field "$ea" p50_us)")
        [ "$sr" = n/a ] || sr="${sr}×"
    fi
    printf '| %s | %s / %s (%s) | %s / %s | %s / %s | %s / %s | %s | %s |\n' "$(keys_label "$n")" \
        "$(us "$(field "$e" p50_us)")" "$(us "$(field "$e" p99_us)")" "$(us "$(field "$e" new_p50_us)")" \
        "$(us "$(field "$m" p50_us)")" "$(us "$(field "$m" p99_us)")" \
        "$(us "$(field "$ea" p50_us)")" "$(us "$(field "$ea" p99_us)")" \
        "$(us "$(field "$so" p50_us)")" "$(us "$(field "$so" p99_us)")" \
        "$seedcell" "$sr"
done
cat <<EOF

Embedded \`everysec\` put p50 at $(keys_label "$SMALL") and $(keys_label "$LARGE") keys measured again in $ROUNDS
alternating round(s) (a fresh namespace of each size per round), since machine drift between two
single runs moves their ratio: p50 at $(keys_label "$SMALL"): $(get emb_rounds_small) µs; at $(keys_label "$LARGE"):
$(get emb_rounds_large) µs; ratio per round $(get emb_rounds_ratios); **median ratio $(get emb_rounds_ratio)**
(the engine issue's target: 1.2).

Seed pattern at each size: file size, time to load it in \`init\`:
EOF
for spec in $SEED_SAVES; do
    n=${spec%:*}; s=$(get "seed_$n")
    echo "- $(keys_label "$n") items: $(field "$s" file_bytes | awk '{printf "%.1f MiB", $1/1048576}'), load $(field "$s" load_s) s"
done

if [ -f "$ROOT/Sources/ActorKVStore/OrderedMapStub.swift" ]; then
    cat <<EOF

Note: this run's engine still keeps each namespace in the temporary sorted-array \`OrderedMap\`
(\`Sources/ActorKVStore/OrderedMapStub.swift\`, a stand-in until the B+tree lands): a new key is
inserted by moving every later entry, O(n), which is what the new-key figures at large sizes show;
overwrites are O(log n).
EOF
fi

c=$(get compaction)
cat <<EOF

## Put latency during compaction (embedded)

A namespace with $(keys_label $COMPACT_KEYS) keys; \`compact()\` (a snapshot of the whole map) runs
concurrently with back-to-back single puts; then the same number of puts with no compaction.
The compaction took $(field "$c" compaction_s) s.

| | puts | p50 | p99 | max |
| --- | --- | --- | --- | --- |
| during \`compact()\` | $(field "$c" during_n) | $(us "$(field "$c" during_p50_us)") | $(us "$(field "$c" during_p99_us)") | $(us "$(field "$c" during_max_us)") |
| without | $(field "$c" without_n) | $(us "$(field "$c" without_p50_us)") | $(us "$(field "$c" without_p99_us)") | $(us "$(field "$c" without_max_us)") |
| ratio during / without | | $(ratio "$(field "$c" during_p50_us)" "$(field "$c" without_p50_us)") | $(ratio "$(field "$c" during_p99_us)" "$(field "$c" without_p99_us)") | $(ratio "$(field "$c" during_max_us)" "$(field "$c" without_max_us)") |

EOF
# Kept across runs: the measurements made by hand, per issue, and the profiling rounds (before
# and after each fix). This file is written anew; those two are its only hand-written parts.
[ -f "$HERE/HANDRUNS.md" ] && { cat "$HERE/HANDRUNS.md"; echo; }
[ -f "$HERE/HOTPATHS.md" ] && { cat "$HERE/HOTPATHS.md"; echo; }
cat <<EOF
## Exact commands

\`\$T\` is the run's temp directory (under \`Benchmarks/out/\`), \`\$S\` the socket directory, \`\$V\` the
100-byte value (\`$(printf 'v%.0s' 1 2 3)…\`, 100 × \`v\`). Bench keys are \`key:\` plus 12 digits, as
redis-benchmark's \`__rand_int__\` makes them; the bulk-load files hold keys in ascending order, each with its own
pseudo-random alphanumeric 100-byte value (the same in both files; a repeated value would let
Redis's RDB compression shrink its files to almost nothing).

\`\`\`sh
# from the repository root
swift build -c release --scratch-path .build-bench --product actorkvd
swift build -c release --scratch-path .build-bench --product actorkv-bench
EOF
awk '!seen[$0]++' "$CMDLOG"
cat <<EOF
\`\`\`

Raw results (\`key=value\`, as parsed):

\`\`\`
EOF
sed "s#$T#\$T#g" "$RESULTS"
echo '```'
} >"$OUT"

# SVG of the throughput ratios.
{
    for spec in "put_p1|PUT vs SET, -P 1" "get_p1|GET, -P 1" "put_p16|PUT vs SET, -P 16" "get_p16|GET, -P 16" \
                "incr_p1|INCR, -P 1" "incr_p16|INCR, -P 16" "rmw|contended read-modify-write (updates/s)" \
                "connect_c1|GET, new connection each, -c 1" "connect_c$TP_C|GET, new connection each, -c $TP_C" \
                "always_c1|PUT vs SET, fsync always, -c 1" "always_c$TP_C|PUT vs SET, fsync always, -c $TP_C"; do
        name=${spec%%|*} label=${spec#*|}
        printf '%s\t%s\n' "$(ratio "$(get "${name}_akv_rps")" "$(get "${name}_redis_rps")")" "$label"
    done
} | awk -F'\t' -v title="ActorKV / Redis 7 throughput ($TP_C clients unless stated, medians of $ROUNDS)" \
        -v subtitle="$MODE mode, $DATE, load average at start $LOAD_START on $(nproc) cores (shared, noisy)" \
        -f "$HERE/chart.awk" >"$SVG"

say "done in ${RUN_SECONDS} s: $OUT and $SVG"
