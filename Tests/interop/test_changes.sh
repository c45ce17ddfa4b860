#!/usr/bin/env bash
# CHANGES by hand: a watcher on `socat` or `nc -U` receives the writes that redis-cli makes,
# as protocol.md shows them; one that resumes FROM a sequence gets exactly the rest.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool nc netcat-openbsd
need_tool socat socat
need_tool redis-cli redis-tools
use_server

W=$(mktemp -d "${TMPDIR:-/tmp}/akvch.XXXXXX")
cli() { timeout "$T" redis-cli -s "$SOCK" "$@"; }

# A watcher (socat, reading until killed) on a namespace nobody wrote yet.
{ printf 'CHANGES watched\r\n'; sleep 5; } </dev/null 2>/dev/null | timeout 30 socat -t 30 - "UNIX-CONNECT:$SOCK" > "$W/socat.out" 2>&1 &
watcher=$!
# A second one through nc, only for keys under "a/".
{ printf 'CHANGES watched PREFIX a/\r\n'; sleep 5; } </dev/null 2>/dev/null | timeout 30 nc -U "$SOCK" > "$W/nc.out" 2>&1 &
prefixed=$!
for _ in $(seq 1 100); do grep -q synced "$W/socat.out" 2>/dev/null && grep -q synced "$W/nc.out" 2>/dev/null && break; sleep 0.05; done
expect_eq "redis-cli PUT" OK "$(cli PUT watched a/theme dark)"
expect_eq "redis-cli BATCH" $'1\nOK' "$(cli BATCH watched DEL a/theme PUT b/other x)"
expect_eq "redis-cli INCR" 1 "$(cli INCR watched a/count)"
for _ in $(seq 1 100); do [ "$(grep -c change "$W/socat.out")" -ge 3 ] && break; sleep 0.05; done
kill "$watcher" "$prefixed" 2>/dev/null
wait "$watcher" "$prefixed" 2>/dev/null
printf '%b' '*3\r\n$7\r\nchanges\r\n$7\r\nwatched\r\n:0\r\n*3\r\n$6\r\nsynced\r\n$7\r\nwatched\r\n:0\r\n' > "$W/expected"
printf '%b' '*4\r\n$6\r\nchange\r\n$7\r\nwatched\r\n:1\r\n*2\r\n$7\r\na/theme\r\n$4\r\ndark\r\n' >> "$W/expected"
cp "$W/expected" "$W/expected-prefixed"
printf '%b' '*4\r\n$6\r\nchange\r\n$7\r\nwatched\r\n:2\r\n*4\r\n$7\r\na/theme\r\n$-1\r\n$7\r\nb/other\r\n$1\r\nx\r\n' >> "$W/expected"
printf '%b' '*4\r\n$6\r\nchange\r\n$7\r\nwatched\r\n:2\r\n*2\r\n$7\r\na/theme\r\n$-1\r\n' >> "$W/expected-prefixed"
printf '%b' '*4\r\n$6\r\nchange\r\n$7\r\nwatched\r\n:3\r\n*2\r\n$7\r\na/count\r\n$1\r\n1\r\n' | tee -a "$W/expected" >> "$W/expected-prefixed"
expect_bytes "socat watcher: header, synced, then each change as redis-cli made it" "$W/expected" "$W/socat.out"
expect_bytes "nc watcher with PREFIX a/: only a/ keys (the batch without b/other)" "$W/expected-prefixed" "$W/nc.out"

# Resuming: FROM 1 gets changes 2 and 3, then synced; while following, PING works and GET is
# refused; QUIT ends it. (Sent one by one: a QUIT pipelined right behind CHANGES would close the
# connection before any change is sent.)
reply=$({ printf 'CHANGES watched FROM 1\r\n'; sleep 0.5; printf 'PING\r\nGET watched a/count\r\nQUIT\r\n'; } |
    timeout "$T" nc -U -N "$SOCK" | tr -d '\r' | tr '\n' ' ')
expect_contains "FROM 1 replays 2 and 3, then synced at 3" ':1 *4 $6 change $7 watched :2 ' "$reply"
expect_contains "... and change 3 before synced" '$7 a/count $1 1 *3 $6 synced $7 watched :3 ' "$reply"
expect_contains "PING while following, GET refused, QUIT ends it" \
    ':3 +PONG -ERR only CHANGES, PING, QUIT and RESET are allowed while following changes +OK ' "$reply"
expect_eq "FROM past the last sequence is an error" \
    "-ERR FROM sequence 9 is after the last sequence of namespace 'watched' (3)" \
    "$(printf 'CHANGES watched FROM 9\r\n' | timeout "$T" nc -U -N "$SOCK" | tr -d '\r')"
rm -rf "$W"
finish
