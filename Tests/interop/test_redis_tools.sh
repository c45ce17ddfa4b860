#!/usr/bin/env bash
# redis-cli and redis-benchmark (redis-tools) against actorkvd, with namespaces as Redis hashes
# (issue #21 item 5): HSCAN paged to the end from the shell as a `--scan` loop would, a `--pipe`
# mass insert of HSETs, `--latency`, RESP3 (`-3`), MULTI/EXEC piped, and redis-benchmark's
# `-t hset` and a custom HGET, which must start without any warning (it asks CONFIG GET first).
# EXPECT_SERVER=redis (with SOCK of a real redis-server) skips ActorKV's own error texts, to
# check the script itself.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool redis-cli redis-tools
need_tool redis-benchmark redis-tools
use_server
EXPECT_SERVER=${EXPECT_SERVER:-actorkv}
TAG=${RUN_TAG:-$$}
W=$(mktemp -d "${TMPDIR:-/tmp}/akvtools.XXXXXX")
also_on_exit 'rm -rf "$W"'
R() { timeout "$T" redis-cli -s "$SOCK" "$@" 2>&1; }
RT() { timeout "$T" redis-cli --no-raw -s "$SOCK" "$@" 2>&1; }

# --- --pipe: 10,000 one-field HSETs, then 10 HSETs of 100 fields each, as RESP.
NS=tools-pipe-$TAG
LC_ALL=C awk -v ns="$NS" 'BEGIN {
    for (i = 0; i < 10000; i++) {
        f = sprintf("f:%05d", i); v = "v" i
        printf "*4\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(ns), ns, length(f), f, length(v), v
    }
    for (c = 0; c < 10; c++) {
        printf "*%d\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n", 2 + 200, length(ns), ns
        for (i = 0; i < 100; i++) {
            f = sprintf("g:%d:%02d", c, i)
            printf "$%d\r\n%s\r\n$1\r\nx\r\n", length(f), f
        }
    }
}' > "$W/mass.resp"
out=$(timeout 30 redis-cli -s "$SOCK" --pipe < "$W/mass.resp" 2>&1)
status=$?
expect_eq "redis-cli --pipe: 10,010 HSETs, no errors" "errors: 0, replies: 10010" "$(printf '%s\n' "$out" | tail -1)"
[ "$status" -eq 0 ] || printf '%s\n' "$out" | head -3 | sed 's/^/#     /'
expect_eq "redis-cli --pipe exits 0" 0 "$status"
expect_eq "HLEN after the mass insert" 11000 "$(R HLEN "$NS")"
expect_eq "HGET of a field the mass insert wrote" v4242 "$(R HGET "$NS" f:04242)"
expect_eq "HGET of a field a 100-field HSET wrote" x "$(R HGET "$NS" g:7:99)"

# --- HSCAN paged to the end (raw output: the cursor line, then field and value lines), while
# redis-cli -r rewrites one other field of the same hash in the background.
timeout 60 redis-cli -s "$SOCK" -r 1000000 -i 0.001 HINCRBY "$NS" churn 1 >/dev/null 2>&1 &
churn=$!
cursor=0 pages=0 bad_cursors=
: > "$W/fields"
while :; do
    R HSCAN "$NS" "$cursor" COUNT 500 > "$W/page"
    pages=$((pages + 1))
    cursor=$(head -1 "$W/page")
    case "$cursor" in ''|*[!0-9]*) bad_cursors+=" '$cursor'"; break ;; esac
    [ "${#cursor}" -le 16 ] && [ "$cursor" -le 9007199254740992 ] || bad_cursors+=" $cursor"
    tail -n +2 "$W/page" | awk 'NR % 2 == 1' >> "$W/fields"
    [ "$cursor" = 0 ] && break
    [ "$pages" -gt 1000 ] && break
done
kill "$churn" 2>/dev/null; wait "$churn" 2>/dev/null
expect_eq "HSCAN pages are > 1 and end with cursor 0" "yes 0" "$([ "$pages" -gt 1 ] && echo yes) $cursor"
expect_eq "every HSCAN cursor is an unsigned decimal integer <= 2^53" "" "$bad_cursors"
grep -v '^churn$' "$W/fields" | sort > "$W/seen"
{ for ((i = 0; i < 10000; i++)); do printf 'f:%05d\n' "$i"; done
  for ((c = 0; c < 10; c++)); do for ((i = 0; i < 100; i++)); do printf 'g:%d:%02d\n' "$c" "$i"; done; done; } | sort > "$W/expected"
if cmp -s "$W/expected" "$W/seen"; then
    ok "redis-cli HSCAN loop: each of the 11,000 fields exactly once ($pages pages) while another client wrote"
else
    not_ok "redis-cli HSCAN loop: each of the 11,000 fields exactly once ($pages pages) while another client wrote"
    note "missing: $(comm -23 "$W/expected" "$W/seen" | wc -l), extra or repeated: $(comm -13 "$W/expected" "$W/seen" | wc -l)"
    comm -3 "$W/expected" "$W/seen" | head -5 | sed 's/^/#     /'
fi
expect_eq "the background writer wrote during the scan" yes "$([ "$(R HGET "$NS" churn)" -gt 0 ] 2>/dev/null && echo yes)"
page=$(RT HSCAN "$NS" 0 COUNT 2 | head -1)
expect_eq "HSCAN's cursor is a bulk string (--no-raw shows it quoted)" yes \
    "$([[ $page =~ ^1\)\ \"[0-9]+\"$ ]] && echo yes || echo "no: $page")"
cursor=0 matched=
while :; do
    R HSCAN "$NS" "$cursor" MATCH 'f:0000?' COUNT 1000 > "$W/page"
    cursor=$(head -1 "$W/page")
    matched+=$(tail -n +2 "$W/page" | awk 'NR % 2 == 1 { printf "%s ", $0 }')
    case "$cursor" in 0|''|*[!0-9]*) break ;; esac
done
expect_eq "HSCAN MATCH 'f:0000?' paged to the end" "f:00000 f:00001 f:00002 f:00003 f:00004 f:00005 f:00006 f:00007 f:00008 f:00009" \
    "$(printf '%s\n' $matched | sort | tr '\n' ' ' | sed 's/ $//')"
if [ "$EXPECT_SERVER" = actorkv ]; then
    # protocol.md, "Namespaces as Redis hashes" (CONTRACT.md had said -ERR).
    expect_eq "HSCAN with a cursor the server never gave: BADCURSOR, no silent restart" \
        "(error) BADCURSOR unknown or expired HSCAN cursor; start again from 0" "$(RT HSCAN "$NS" 9007199254740991)"
fi

# --- RESP3 through redis-cli -3 (HELLO 3): maps and nulls as redis-cli prints them.
SMALL=tools-small-$TAG
R HSET "$SMALL" a 1 b 2 >/dev/null
expect_eq "redis-cli -3 HGETALL prints a map" $'1# "a" => "1"\n2# "b" => "2"' \
    "$(timeout "$T" redis-cli -3 --no-raw -s "$SOCK" HGETALL "$SMALL" 2>&1)"
expect_eq "redis-cli -3 HGET of a missing field prints (nil)" "(nil)" \
    "$(timeout "$T" redis-cli -3 --no-raw -s "$SOCK" HGET "$SMALL" nope 2>&1)"
hello=$(timeout "$T" redis-cli -3 --no-raw -s "$SOCK" HELLO 3 2>&1)
expect_contains "redis-cli -3 HELLO 3: proto 3 in a map" '3# "proto" => (integer) 3' "$hello"
expect_contains "redis-cli -3 HELLO 3: server" "1# \"server\" => \"$EXPECT_SERVER\"" "$hello"

# --- MULTI/EXEC piped through redis-cli (one connection).
expect_eq "MULTI, two HSETs, EXEC through redis-cli" "$(printf '%s\n' OK QUEUED QUEUED 1 0)" \
    "$(printf 'MULTI\nHSET %s c 3\nHSET %s a 10\nEXEC\n' "$SMALL" "$SMALL" | R)"
out=$(printf 'MULTI\nHSET %s d 4\nNOSUCHCOMMAND x\nEXEC\n' "$SMALL" | R)
expect_contains "MULTI with an unknown command: EXEC is EXECABORT" "EXECABORT" "$out"
expect_eq "... and nothing of it applied" "$(printf '%s\n' a 10 b 2 c 3)" "$(R HGETALL "$SMALL" | paste - - | sort | tr '\t' '\n')"

# --- --latency: not on a terminal it samples for a second, prints "min max avg samples", exits.
out=$(timeout 15 redis-cli -s "$SOCK" --latency 2>&1)
status=$?
expect_eq "redis-cli --latency exits 0 after its second" 0 "$status"
check "redis-cli --latency prints min, max, avg and a sample count > 0" \
    eval '[[ $out =~ ^[0-9]+\ [0-9]+\ [0-9.]+\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]'
note "redis-cli --latency: $out"

# --- redis-benchmark: -t hset, a custom HGET, each with -P 1 and -P 16, and -t hset in RESP3.
bench() {
    local name=$1 out status; shift
    out=$(timeout 30 redis-benchmark -s "$SOCK" -q "$@" 2>&1)
    status=$?
    out=$(printf '%s' "$out" | tr '\r' '\n' | grep -v '^ *$' | grep -v 'rps=' )
    if [ "$status" -eq 0 ] && printf '%s\n' "$out" | grep -q 'requests per second' &&
        ! printf '%s\n' "$out" | grep -Eqi 'warn|config|error|ERR'; then
        ok "$name"
    else
        not_ok "$name"; note "exit status $status" "output:"; printf '%s\n' "$out" | head -5 | sed 's/^/#     /'
    fi
    note "$(printf '%s\n' "$out" | grep 'requests per second' | head -1)"
}
bench "redis-benchmark -t hset -n 2000: no warnings, requests per second" -t hset -n 2000
bench "redis-benchmark -t hset -n 2000 -P 16" -t hset -n 2000 -P 16
expect_eq "redis-benchmark's HSET wrote its hash (myhash element:__rand_int__, 3 bytes)" 3 "$(R HSTRLEN myhash element:__rand_int__)"
bench "redis-benchmark custom HGET -n 2000: no warnings" -n 2000 HGET myhash element:__rand_int__
bench "redis-benchmark custom HGET -n 2000 -P 16" -n 2000 -P 16 HGET myhash element:__rand_int__
bench "redis-benchmark -3 (RESP3) -t hset -n 2000" -3 -t hset -n 2000
# What redis-benchmark asks before it starts: each a [name, value] pair.
expect_eq "CONFIG GET save -> save and a value" save "$(R CONFIG GET save | head -1)"
expect_eq "CONFIG GET appendonly -> appendonly and yes or no" yes \
    "$(R CONFIG GET appendonly | tr '\n' ' ' | grep -Eq '^appendonly (yes|no) $' && echo yes)"
expect_eq "CONFIG GET maxmemory-policy -> noeviction (job queues refuse or warn otherwise)" \
    "maxmemory-policy noeviction " "$(R CONFIG GET maxmemory-policy | tr '\n' ' ')"

# --- redis-cli --memkeys: MEMORY USAGE of each hash (protocol.md, "MEMORY USAGE"): a size for
# every hash, no warning, the biggest named; redis-py's memory_usage asks the same.
MK=tools-memk-$TAG
R HSET "$MK-small" a 1 >/dev/null
R HSET "$MK-big" $(seq 1 300 | sed 's/.*/field& a-value-of-some-length-&/') >/dev/null
if [ -n "${ACTORKV_ETCD:-}" ]; then
    # Through an agent (cluster mode) the keys live in etcd: MEMORY USAGE is refused, and
    # redis-cli --memkeys warns for each hash and still finishes.
    expect_contains "MEMORY USAGE through an agent: refused" "not available in cluster mode" "$(R MEMORY USAGE "$MK-big")"
    out=$(timeout 30 redis-cli -s "$SOCK" --memkeys --pattern "$MK-*" 2>&1); status=$?
    expect_eq "redis-cli --memkeys through an agent still exits 0" 0 "$status"
    expect_contains "... warning that MEMORY USAGE failed" "MEMORY USAGE on" "$out"
    expect_eq "... and the hashes are untouched" 300 "$(R HLEN "$MK-big")"
else
    out=$(timeout 30 redis-cli -s "$SOCK" --memkeys --pattern "$MK-*" 2>&1)
    expect_eq "redis-cli --memkeys names the biggest hash" "Biggest   hash found '\"$MK-big\"'" \
        "$(printf '%s\n' "$out" | grep -o "^Biggest   hash found '\"[^']*\"'")"
    expect_eq "... without a warning that MEMORY USAGE failed" "" "$(printf '%s\n' "$out" | grep -i warn)"
    small=$(R MEMORY USAGE "$MK-small") big=$(R MEMORY USAGE "$MK-big")
    check "MEMORY USAGE: the 300-field hash ($big) takes more than the 1-field one ($small)" test "${big:-0}" -gt "${small:-0}"
    check "... and more than the 9,984 bytes of its fields and values" test "${big:-0}" -gt 9984
    expect_eq "MEMORY USAGE of a hash that does not exist: nil" "" "$(R MEMORY USAGE "$MK-none")"
    expect_eq "MEMORY USAGE ... SAMPLES 0 (sample everything): the same figure" "$big" "$(R MEMORY USAGE "$MK-big" SAMPLES 0)"
    expect_contains "MEMORY USAGE ... SAMPLES -1: a syntax error" "syntax error" "$(R MEMORY USAGE "$MK-big" SAMPLES -1)"
fi

finish
