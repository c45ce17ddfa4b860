# Helpers shared by the interop test scripts (sourced, not run).
#
# Each test_*.sh sources this file, then calls `ok`/`not_ok` (or the expect_* helpers) once
# per check and `finish` at the end, which exits non-zero if any check failed.
#
# Environment:
#   SOCK      socket of a running actorkvd (run.sh sets it). If unset, `use_server` starts a
#             private server for the script and stops it at exit.
#   ACTORKVD  the server binary (default: <repo root>/.build/debug/actorkvd)
#   T         seconds allowed for each client call (default 10)

INTEROP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$INTEROP_DIR/../.." && pwd)
ACTORKVD=${ACTORKVD:-$ROOT/.build/debug/actorkvd}
T=${T:-10}
PASSED=0
FAILED=0
SCRIPT_NAME=$(basename "$0")

ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
# note TEXT...: a diagnostic line (TAP style, ignored by counters).
note() { printf '#   %s\n' "$@"; }

# check NAME COMMAND...: ok if the command succeeds.
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# finish: prints this script's tally and exits 0 only if nothing failed.
finish() {
    echo "# $SCRIPT_NAME: $PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
    exit
}

# hex: stdin as one line of lowercase hex (exact comparison of binary replies).
hex() { od -An -v -tx1 | tr -d ' \n'; }
# show: stdin as `od -c`, indented, for failure diagnostics.
show() { od -An -v -c | sed 's/^/#     /'; }

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
    if [ "$2" == "$3" ]; then ok "$1"; else
        not_ok "$1"
        printf '#   expected: %q\n#   actual:   %q\n' "$2" "$3"
    fi
}

# expect_contains NAME NEEDLE HAYSTACK
expect_contains() {
    case "$3" in
        *"$2"*) ok "$1" ;;
        *) not_ok "$1"; printf '#   expected to contain: %q\n#   actual: %q\n' "$2" "$3" ;;
    esac
}

# expect_bytes NAME EXPECTED_FILE ACTUAL_FILE: exact byte comparison of two files.
expect_bytes() {
    if cmp -s "$2" "$3"; then ok "$1"; else
        not_ok "$1"
        echo "#   expected:"; show < "$2" | head -20
        echo "#   actual:"; show < "$3" | head -20
    fi
}

# need_tool NAME PACKAGE: fails the script at once if a client tool is missing.
need_tool() {
    if ! command -v "$1" >/dev/null 2>&1; then
        not_ok "$1 is installed (apt-get install $2)"
        finish
    fi
}

# nc_send FORMAT [ARGS...]: sends printf FORMAT through `nc -U -N $SOCK`, prints the reply
# bytes. Status 124 means the server did not close the connection in time.
nc_send() {
    # shellcheck disable=SC2059
    printf -- "$@" | timeout "$T" nc -U -N "$SOCK"
}

# expect_nc NAME REQUEST_FORMAT REPLY_FORMAT: exact reply to an inline/RESP request via nc.
expect_nc() {
    local name=$1 request=$2 reply=$3 tmp
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/akvt.XXXXXX")
    # shellcheck disable=SC2059
    printf -- "$reply" > "$tmp/expected"
    nc_send "$request" > "$tmp/actual"
    local status=$?
    if [ $status -ne 0 ]; then
        not_ok "$name"; note "nc exited $status (124: timed out)"; show < "$tmp/actual" | head -20
    else
        expect_bytes "$name" "$tmp/expected" "$tmp/actual"
    fi
    rm -rf "$tmp"
}

# resp ARG...: prints the arguments as one RESP multibulk request (arguments are printf'd
# with %b, so "\x00" or "\r\n" inside an argument become those bytes).
resp() {
    local arg bytes
    printf '*%d\r\n' $#
    for arg in "$@"; do
        bytes=$(printf '%b' "$arg" | wc -c)
        printf '$%d\r\n' "$bytes"
        printf '%b' "$arg"
        printf '\r\n'
    done
}

# ping_ok SOCKET: true if a server answers PING there.
ping_ok() {
    [ -S "$1" ] || return 1
    if command -v nc >/dev/null 2>&1; then
        [ "$(printf 'PING\r\n' | timeout 5 nc -U -N "$1" 2>/dev/null)" == $'+PONG\r' ]
    elif command -v socat >/dev/null 2>&1; then
        [ "$(printf 'PING\r\n' | timeout 5 socat -t 5 - "UNIX-CONNECT:$1" 2>/dev/null)" == $'+PONG\r' ]
    else
        [ "$(timeout 5 redis-cli -s "$1" PING 2>/dev/null)" == PONG ]
    fi
}

# is_running PID: true while the process exists and has not exited (a zombie has).
is_running() {
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ]
}

# wait_ping SOCKET PID: waits (at most 60 s) until the server answers; false if it exited
# or never answered.
wait_ping() {
    local i
    for ((i = 0; i < 600; i++)); do
        ping_ok "$1" && return 0
        is_running "$2" || return 1
        sleep 0.1
    done
    return 1
}

# wait_exit PID: waits (at most 60 s) for a child to exit and returns its exit status;
# returns 255 after SIGKILLing it if it did not exit.
wait_exit() {
    local pid=$1 i
    for ((i = 0; i < 600; i++)); do
        is_running "$pid" || break
        sleep 0.1
    done
    if is_running "$pid"; then
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 255
    fi
    wait "$pid"
}

# use_server: makes sure SOCK names a running server; starts a private one when SOCK is unset
# (running a test script on its own), stopped with SIGTERM when the script exits.
use_server() {
    if [ -n "${SOCK:-}" ]; then
        if ! ping_ok "$SOCK"; then not_ok "a server answers PING on SOCK=$SOCK"; finish; fi
        return
    fi
    if [ ! -x "$ACTORKVD" ]; then
        not_ok "actorkvd found at $ACTORKVD (build it, or set ACTORKVD or SOCK)"
        finish
    fi
    PRIVATE_DIR=$(mktemp -d /tmp/akvp.XXXXXX)
    SOCK=$PRIVATE_DIR/s
    "$ACTORKVD" --socket "$SOCK" --data-dir "$PRIVATE_DIR/data" \
        </dev/null >"$PRIVATE_DIR/server.log" 2>&1 &
    PRIVATE_PID=$!
    trap 'kill -TERM "$PRIVATE_PID" 2>/dev/null; wait_exit "$PRIVATE_PID"; rm -rf "$PRIVATE_DIR"' EXIT
    if ! wait_ping "$SOCK" "$PRIVATE_PID"; then
        not_ok "private actorkvd started"; sed 's/^/#   /' "$PRIVATE_DIR/server.log"; finish
    fi
    export SOCK
}

# also_on_exit COMMAND: runs COMMAND (text, evaluated then) when the script exits, before the
# exit trap already set, which it keeps (use_server's stops the private server it started).
# May be called any number of times: the last COMMAND given runs first. (The trap holds the
# earlier trap's text itself: one kept in a variable, as it once was, made a second call's trap
# evaluate itself without end, until bash crashed.)
also_on_exit() {
    local command=$1 previous=""
    if [ -n "$(trap -p EXIT)" ]; then eval "set -- $(trap -p EXIT)"; previous=$3; fi
    trap -- "$command
$previous" EXIT
}

# relay NAME LIMIT COMMAND...: runs a client program that prints its own `ok`/`not ok` lines
# (the clients/ scenario programs), at most LIMIT seconds; prints its output, adds its checks to
# this script's tally, and fails NAME if it exited non-zero (or timed out) without a `not ok`.
relay() {
    local name=$1 limit=$2 output status passed failed start=$SECONDS
    shift 2
    output=$(timeout -k 5 "$limit" "$@" 2>&1)
    status=$?
    printf '%s\n' "$output"
    passed=$(printf '%s\n' "$output" | grep -c '^ok - ')
    failed=$(printf '%s\n' "$output" | grep -c '^not ok - ')
    PASSED=$((PASSED + passed))
    FAILED=$((FAILED + failed))
    if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
        not_ok "$name exited $status$([ "$status" -eq 124 ] && echo " (timed out after ${limit}s)")"
    elif [ "$status" -eq 0 ] && [ "$passed" -eq 0 ]; then
        not_ok "$name ran checks"
    fi
    note "$name took $((SECONDS - start))s"
}
