#!/usr/bin/env bash
# Sessions through `socat - UNIX-CONNECT:$SOCK`: inline commands, RESP multibulk requests
# written with printf (binary values), and an interactive session over a coprocess.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool socat socat
use_server

TMP=$(mktemp -d "${TMPDIR:-/tmp}/akvs.XXXXXX")

# sx FORMAT [ARGS...]: printf's bytes through socat (waits up to $T for the server to close
# after our EOF; the server closes once it has replied to everything).
sx() {
    # shellcheck disable=SC2059
    printf -- "$@" | timeout "$T" socat -t "$T" - "UNIX-CONNECT:$SOCK"
}

# expect_sx NAME REQUEST_FORMAT REPLY_FORMAT
expect_sx() {
    printf -- "$3" > "$TMP/expected"
    sx "$2" > "$TMP/actual"
    local status=$?
    if [ $status -ne 0 ]; then not_ok "$1"; note "socat exited $status"; return; fi
    expect_bytes "$1" "$TMP/expected" "$TMP/actual"
}

expect_sx "PING" 'PING\r\n' '+PONG\r\n'
expect_sx "inline PUT, GET, EXISTS, DEL" \
    'PUT socat greeting "hello, world"\r\nGET socat greeting\r\nEXISTS socat greeting\r\nDEL socat greeting\r\nGET socat greeting\r\n' \
    '+OK\r\n$12\r\nhello, world\r\n:1\r\n:1\r\n$-1\r\n'

# RESP multibulk: the value holds NUL, CR LF, 0xFF and a fake RESP header.
expect_sx "multibulk PUT of a binary value" \
    '*4\r\n$3\r\nPUT\r\n$5\r\nsocat\r\n$3\r\nbin\r\n$12\r\n\x00\r\n\xff*1\r\n$3\r\n\r\n' \
    '+OK\r\n'
expect_sx "multibulk GET returns the exact bytes" \
    '*3\r\n$3\r\nGET\r\n$5\r\nsocat\r\n$3\r\nbin\r\n' \
    '$12\r\n\x00\r\n\xff*1\r\n$3\r\n\r\n'
expect_sx "inline GET of the same key returns the same bytes" \
    'GET socat bin\r\n' '$12\r\n\x00\r\n\xff*1\r\n$3\r\n\r\n'
expect_sx "binary key via multibulk, seen by SCAN with a hex cursor" \
    '*4\r\n$3\r\nPUT\r\n$5\r\nsocat\r\n$3\r\n\x00k\xff\r\n$1\r\nv\r\n*5\r\n$4\r\nSCAN\r\n$5\r\nsocat\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$1\r\n1\r\n' \
    '+OK\r\n*2\r\n$7\r\nk006bff\r\n*2\r\n$3\r\n\x00k\xff\r\n$1\r\nv\r\n'
expect_sx "inline and multibulk requests mixed in one stream" \
    'PING a\r\n*2\r\n$4\r\nPING\r\n$1\r\nb\r\nPING c\r\n' \
    '$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n'
# A request that arrives in pieces (separate writes) is put together.
{ printf '*3\r\n$3\r\nGE'; sleep 0.2; printf 'T\r\n$5\r\nsoc'; sleep 0.2; printf 'at\r\n$3\r\nbin\r'; sleep 0.2; printf '\nPI'; sleep 0.2; printf 'NG\r\n'; } \
    | timeout "$T" socat -t "$T" - "UNIX-CONNECT:$SOCK" > "$TMP/actual"
printf '$12\r\n\x00\r\n\xff*1\r\n$3\r\n\r\n+PONG\r\n' > "$TMP/expected"
expect_bytes "a request arriving in pieces is put together" "$TMP/expected" "$TMP/actual"
expect_sx "multibulk BATCH" \
    '*7\r\n$5\r\nBATCH\r\n$5\r\nsocat\r\n$3\r\nPUT\r\n$1\r\na\r\n$2\r\n\r\n\r\n$3\r\nDEL\r\n$1\r\na\r\n' \
    '*2\r\n+OK\r\n:1\r\n'

# Framing errors close the connection after -PROTO.
expect_sx "a bulk length that does not match its data is -PROTO, then close" \
    '*2\r\n$4\r\nPING\r\n$2\r\nabc\r\nPING\r\n' \
    "-PROTO expected '\\\\r\\\\n' after bulk data\r\n"
expect_sx "a multibulk element without \$ is -PROTO" \
    '*1\r\n:4\r\nPING\r\n' "-PROTO expected '\$', got ':'\r\n"
expect_sx "a negative multibulk count is skipped, as in Redis" '*-5\r\nPING\r\n' '+PONG\r\n'
expect_sx "a malformed multibulk count is -PROTO" '*-x\r\n' '-PROTO invalid multibulk length\r\n'
# Over a limit: the size, the limit (the defaults here) and the flag that sets it.
expect_sx "a bulk over the limit is -PROTO with its size, the limit and --max-bulk-bytes" '*1\r\n$67108865\r\n' \
    '-PROTO invalid bulk length: 67108865 bytes, over the limit of 67108864 (actorkvd --max-bulk-bytes)\r\n'
expect_sx "too many arguments is -PROTO with the count, the limit and --max-arguments" '*1048577\r\n' \
    '-PROTO invalid multibulk length: 1048577 arguments, over the limit of 1048576 (actorkvd --max-arguments)\r\n'

# A large binary value (1 MiB of random bytes) through a multibulk request.
head -c 1048576 /dev/urandom > "$TMP/big"
{ printf '*4\r\n$3\r\nPUT\r\n$5\r\nsocat\r\n$3\r\nbig\r\n$1048576\r\n'; cat "$TMP/big"; printf '\r\n'; } > "$TMP/request"
{ printf '*3\r\n$3\r\nGET\r\n$5\r\nsocat\r\n$3\r\nbig\r\n'; } >> "$TMP/request"
{ printf '+OK\r\n$1048576\r\n'; cat "$TMP/big"; printf '\r\n'; } > "$TMP/expected-big"
timeout "$T" socat -t "$T" - "UNIX-CONNECT:$SOCK" < "$TMP/request" > "$TMP/actual-big"
expect_bytes "1 MiB random value round trip" "$TMP/expected-big" "$TMP/actual-big"

# An interactive session: one connection, request, read the reply, request again.
coproc SESSION { exec timeout 30 socat -t 0.5 - "UNIX-CONNECT:$SOCK" 2>/dev/null; }
session_pid=$SESSION_PID
# ask LINE: sends one inline request; reads one reply line into $line (CR stripped).
ask() {
    printf '%s\r\n' "$1" >&"${SESSION[1]}"
    line=
    IFS= read -r -t "$T" line <&"${SESSION[0]}"
    line=${line%$'\r'}
}
line=
ask "PUT socat session 1"; r1=$line
ask "GET socat session"; r2=$line; IFS= read -r -t "$T" r3 <&"${SESSION[0]}"; r3=${r3%$'\r'}
ask "NOSUCHCOMMAND"; r4=$line
ask "PUT socat session 2"; r5=$line
ask "EXISTS socat session"; r6=$line
expect_eq "interactive session over one connection" \
    "+OK|\$1|1|-ERR unknown command 'NOSUCHCOMMAND'; ActorKV keeps keys in namespaces: see protocol.md \"Differences from Redis\"|+OK|:1" "$r1|$r2|$r3|$r4|$r5|$r6"
ask "QUIT"; r7=$line
IFS= read -r -t "$T" after <&"${SESSION[0]}"
status=$?
expect_eq "QUIT ends the interactive session" "+OK|eof" "$r7|$([ $status -ne 0 ] && [ $status -lt 128 ] && echo eof || echo "more: $after")"
wait "$session_pid" 2>/dev/null

rm -rf "$TMP"
finish
