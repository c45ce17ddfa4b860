#!/usr/bin/env bash
# Inline (typed) commands through `nc -U -N`, as a person would try the server by hand.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool nc netcat-openbsd
use_server

expect_nc "PING" 'PING\r\n' '+PONG\r\n'
expect_nc "PING with a quoted message" 'PING "hello world"\r\n' '$11\r\nhello world\r\n'
expect_nc "commands are case-insensitive; LF alone ends a line" 'ping\nPiNg x\n' '+PONG\r\n$1\r\nx\r\n'
expect_nc "empty lines are skipped" '\r\n  \r\n\nPING\r\n' '+PONG\r\n'

expect_nc "PUT then GET" \
    'PUT config theme dark\r\nGET config theme\r\n' \
    '+OK\r\n$4\r\ndark\r\n'
expect_nc "GET of a missing key is a null bulk" 'GET config nope\r\n' '$-1\r\n'
expect_nc "GET in a missing namespace is a null bulk" 'GET no-such-ns k\r\n' '$-1\r\n'

expect_nc "double quotes keep spaces" \
    'PUT nc "key one" "a b  c"\r\nGET nc "key one"\r\n' \
    '+OK\r\n$6\r\na b  c\r\n'
expect_nc "\\x escapes make binary bytes (NUL, 0xFF, CR LF)" \
    'PUT nc bin "v\\x00\\xff\\r\\n"\r\nGET nc bin\r\n' \
    '+OK\r\n$5\r\nv\000\377\r\n\r\n'
expect_nc "\\n \\t \\\\ \\\" escapes" \
    'PUT nc esc "1\\n2\\t3\\\\4\\"5"\r\nGET nc esc\r\n' \
    '+OK\r\n$9\r\n1\n2\t3\\4"5\r\n'
expect_nc "an incomplete \\x escape is literal" \
    'PUT nc x "\\xZZ"\r\nGET nc x\r\n' \
    '+OK\r\n$3\r\nxZZ\r\n'
expect_nc "single quotes are literal except \\'" \
    "PUT nc sq 'a \"b\" \\\\n it\\\\'s'\r\nGET nc sq\r\n" \
    '+OK\r\n$13\r\na "b" \\n it'"'"'s\r\n'
expect_nc "an empty quoted value" 'PUT nc empty ""\r\nGET nc empty\r\nEXISTS nc empty\r\n' \
    '+OK\r\n$0\r\n\r\n:1\r\n'

expect_nc "DEL counts the keys removed" \
    'PUT nc d1 1\r\nPUT nc d2 2\r\nDEL nc d1 d2 d3\r\nDEL nc d1 d2\r\nEXISTS nc d1 d2\r\n' \
    '+OK\r\n+OK\r\n:2\r\n:0\r\n:0\r\n'
expect_nc "EXISTS counts keys (repeats count twice)" \
    'PUT nc e 1\r\nEXISTS nc e e nope\r\n' '+OK\r\n:2\r\n'

# SCAN: keys in order, cursor "k" + hex of the last key, "0" at the end.
expect_nc "SCAN first page, with PREFIX and COUNT" \
    'PUT scan p1 one\r\nPUT scan p2 two\r\nPUT scan p3 three\r\nPUT scan q1 other\r\nSCAN scan 0 PREFIX p COUNT 2\r\n' \
    '+OK\r\n+OK\r\n+OK\r\n+OK\r\n*2\r\n$5\r\nk7032\r\n*4\r\n$2\r\np1\r\n$3\r\none\r\n$2\r\np2\r\n$3\r\ntwo\r\n'
expect_nc "SCAN next page ends with cursor 0" \
    'SCAN scan k7032 PREFIX p COUNT 2\r\n' \
    '*2\r\n$1\r\n0\r\n*2\r\n$2\r\np3\r\n$5\r\nthree\r\n'
expect_nc "SCAN with default COUNT, then COUNT" \
    'SCAN scan 0\r\nCOUNT scan\r\n' \
    '*2\r\n$1\r\n0\r\n*8\r\n$2\r\np1\r\n$3\r\none\r\n$2\r\np2\r\n$3\r\ntwo\r\n$2\r\np3\r\n$5\r\nthree\r\n$2\r\nq1\r\n$5\r\nother\r\n:4\r\n'
reply=$(nc_send 'SCAN scan bogus\r\nPING\r\n' | tr -d '\r')
expect_eq "SCAN with a bad cursor is BADCURSOR" $'-BADCURSOR invalid cursor\n+PONG' "$reply"

expect_nc "BATCH replies per op" \
    'BATCH nc PUT b1 x PUT b2 y DEL b1 DEL b1\r\n' \
    '*4\r\n+OK\r\n+OK\r\n:1\r\n:0\r\n'
expect_nc "BATCH with an empty key applies nothing" \
    'BATCH nc PUT b3 x PUT "" y\r\nEXISTS nc b3\r\n' \
    '-BADKEY key is 0 bytes; keys are 1 to 65536 bytes\r\n:0\r\n'

# Errors that keep the connection usable.
expect_nc "an unknown command is ERR and the connection stays usable" \
    'FOO bar\r\nPING\r\n' \
    "-ERR unknown command 'FOO'; ActorKV keeps keys in namespaces: see protocol.md \"Differences from Redis\"\r\n+PONG\r\n"
reply=$(nc_send 'GET nc\r\nPING\r\n' | tr -d '\r')
expect_eq "wrong arity is ERR and the connection stays usable" \
    $'-ERR wrong number of arguments for \'GET\' (usage: GET ns key); keys live in namespaces (Redis\'s hashes): GET ns key, or HGET ns field\n+PONG' "$reply"
reply=$(nc_send 'GET a/b k\r\nPING\r\n' | tr -d '\r')
case "$reply" in
    $'-BADNS '*$'\n+PONG') ok "a namespace with a slash is BADNS" ;;
    *) not_ok "a namespace with a slash is BADNS"; note "$reply" ;;
esac

# Framing errors: -PROTO, then the server closes the connection (nc ends before its timeout,
# and the PING after the bad line gets no reply).
expect_nc "unbalanced quotes: replies before it, then -PROTO, then close" \
    'PING\r\nGET nc "oops\r\nPING\r\n' \
    '+PONG\r\n-PROTO unbalanced quotes in request\r\n'
expect_nc "a closing quote must be followed by a space" \
    'GET nc "a"b\r\nPING\r\n' \
    '-PROTO unbalanced quotes in request\r\n'
expect_nc "QUIT replies +OK and closes" 'QUIT\r\nPING\r\n' '+OK\r\n'

# Many commands in one write (pipelining) reply in order.
{
    for i in $(seq 1 200); do printf 'PUT many k%03d v%d\r\n' "$i" "$i"; done
    printf 'COUNT many\r\nGET many k137\r\n'
} > "${TMPDIR:-/tmp}/akv-nc-$$"
reply=$(timeout "$T" nc -U -N "$SOCK" < "${TMPDIR:-/tmp}/akv-nc-$$" | tr -d '\r')
rm -f "${TMPDIR:-/tmp}/akv-nc-$$"
expect_eq "200 pipelined PUTs, then COUNT and GET" \
    "$(for i in $(seq 1 200); do echo +OK; done)"$'\n:200\n$4\nv137' "$reply"

finish
