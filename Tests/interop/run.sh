#!/usr/bin/env bash
# Runs the shell interop tests against a real actorkvd. Builds nothing.
#
#   Tests/interop/run.sh [NAME ...]   (NAME like nc or test_nc.sh; default: every test_*.sh here)
#
# The server is $ACTORKVD, or <repo root>/.build/debug/actorkvd. It is started in a fresh
# temporary directory (with ACTORKV_ETCD=URL[,URL…] set: as an agent of that etcd cluster); every test script runs with SOCK set to its socket (and ACTORKVD, T);
# then the server is stopped with SIGTERM and must exit 0 and remove its socket.
# Prints the scripts' `ok`/`not ok` lines and a last line `N passed, M failed`; exits non-zero
# if anything failed. Needs nc (netcat-openbsd), socat, redis-cli and redis-benchmark
# (redis-tools), python3, node with node-redis, ruby with ruby-redis, and redis-py + hiredis in
# <repo root>/.build-venv (.ci/run installs them all).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export ACTORKVD=${ACTORKVD:-$ROOT/.build/debug/actorkvd}
export T=${T:-10}
# Most seconds one test script may take.
SCRIPT_LIMIT=${SCRIPT_LIMIT:-180}

# shellcheck source=lib.sh
. "$HERE/lib.sh"

passed=0
failed=0
summary() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

if [ ! -x "$ACTORKVD" ]; then
    echo "not ok - actorkvd found at $ACTORKVD (run swift build, or set ACTORKVD)"
    failed=1
    summary
fi

WORK=$(mktemp -d /tmp/akvi.XXXXXX)
export SOCK=$WORK/s
# With ACTORKV_ETCD (endpoints), the server is an agent of that etcd cluster (cluster mode).
if [ -n "${ACTORKV_ETCD:-}" ]; then
    "$ACTORKVD" --socket "$SOCK" --etcd "$ACTORKV_ETCD" --etcd-prefix "interop$$/" </dev/null >"$WORK/server.log" 2>&1 &
else
    "$ACTORKVD" --socket "$SOCK" --data-dir "$WORK/data" </dev/null >"$WORK/server.log" 2>&1 &
fi
SERVER_PID=$!
cleanup() {
    if is_running "$SERVER_PID"; then kill -9 "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if wait_ping "$SOCK" "$SERVER_PID"; then
    echo "ok - actorkvd started and answers PING"
    passed=$((passed + 1))
else
    echo "not ok - actorkvd started and answers PING"
    sed 's/^/#   /' "$WORK/server.log"
    failed=$((failed + 1))
    summary
fi

if [ $# -gt 0 ]; then
    scripts=()
    for name in "$@"; do name=${name%.sh}; scripts+=("$HERE/test_${name#test_}.sh"); done
else
    scripts=("$HERE"/test_*.sh)
fi

for script in "${scripts[@]}"; do
    name=$(basename "$script")
    echo "# $name"
    start=$SECONDS
    output=$(cd "$WORK" && timeout -k 5 "$SCRIPT_LIMIT" bash "$script" 2>&1)
    status=$?
    printf '%s\n' "$output"
    script_passed=$(printf '%s\n' "$output" | grep -c '^ok - ')
    script_failed=$(printf '%s\n' "$output" | grep -c '^not ok - ')
    passed=$((passed + script_passed))
    failed=$((failed + script_failed))
    if [ "$status" -ne 0 ] && [ "$script_failed" -eq 0 ]; then
        echo "not ok - $name exited $status$([ "$status" -eq 124 ] && echo " (timed out after ${SCRIPT_LIMIT}s)")"
        failed=$((failed + 1))
    elif [ "$status" -eq 0 ] && [ "$script_failed" -gt 0 ]; then
        echo "not ok - $name exited 0 despite failures"
        failed=$((failed + 1))
    fi
    echo "# $name took $((SECONDS - start))s"
done

# The shared server must still be serving, then stop cleanly.
if ping_ok "$SOCK"; then
    echo "ok - actorkvd still serving after the tests"; passed=$((passed + 1))
else
    echo "not ok - actorkvd still serving after the tests"; failed=$((failed + 1))
fi
kill -TERM "$SERVER_PID"
wait_exit "$SERVER_PID"
status=$?
if [ "$status" -eq 0 ]; then
    echo "ok - actorkvd exits 0 on SIGTERM"; passed=$((passed + 1))
else
    echo "not ok - actorkvd exits 0 on SIGTERM (exit status $status)"; failed=$((failed + 1))
    sed 's/^/#   /' "$WORK/server.log" | tail -20
fi
if [ ! -e "$SOCK" ]; then
    echo "ok - actorkvd removed its socket on SIGTERM"; passed=$((passed + 1))
else
    echo "not ok - actorkvd removed its socket on SIGTERM"; failed=$((failed + 1))
fi
summary
