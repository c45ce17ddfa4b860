#!/usr/bin/env bash
# The stock Redis command-line client, `redis-cli -s $SOCK`, against actorkvd.
# Its output is --raw when not on a terminal; --no-raw shows types: (integer), (nil), (error).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool redis-cli redis-tools
use_server

R() { timeout "$T" redis-cli -s "$SOCK" "$@" 2>&1; }
RT() { timeout "$T" redis-cli --no-raw -s "$SOCK" "$@" 2>&1; }

expect_eq "PING" "PONG" "$(R PING)"
expect_eq "PING message" "hi there" "$(R PING "hi there")"
expect_eq "PUT" "OK" "$(R PUT rcli color blue)"
expect_eq "GET" "blue" "$(R GET rcli color)"
expect_eq "GET missing key (--no-raw)" "(nil)" "$(RT GET rcli nope)"

multi=$'hello world\n  second line\twith a tab'
expect_eq "PUT a value with spaces and newlines" "OK" "$(R PUT rcli multi "$multi")"
expect_eq "GET it back exactly (raw)" "$multi" "$(R GET rcli multi)"
expect_eq "GET it back quoted (--no-raw)" '"hello world\n  second line\twith a tab"' "$(RT GET rcli multi)"

# -x: the last argument is read from stdin (binary safe).
expect_eq "PUT a binary value from stdin (-x)" "OK" "$(printf 'bin\000ary\377' | R -x PUT rcli bin)"
expect_eq "GET the binary value (--no-raw escapes it)" '"bin\x00ary\xff"' "$(RT GET rcli bin)"

expect_eq "EXISTS counts" "(integer) 2" "$(RT EXISTS rcli color multi nope)"
expect_eq "DEL counts" "2" "$(R DEL rcli color nope bin)"
expect_eq "COUNT" "1" "$(R COUNT rcli)"

for i in 1 2 3 4 5; do R PUT rscan "s$i" "v$i" >/dev/null; done
R PUT rscan t1 other >/dev/null
expect_eq "SCAN with PREFIX, one page (raw: cursor, then key value ...)" \
    "$(printf '%s\n' 0 s1 v1 s2 v2 s3 v3 s4 v4 s5 v5)" "$(R SCAN rscan 0 PREFIX s COUNT 10)"
expect_eq "SCAN first of several pages (--no-raw)" \
    "$(printf '%s\n' '1) "k7332"' '2) 1) "s1"' '   2) "v1"' '   3) "s2"' '   4) "v2"')" \
    "$(RT SCAN rscan 0 PREFIX s COUNT 2)"
expect_eq "SCAN last page returns cursor 0" \
    "$(printf '%s\n' 0 s5 v5)" "$(R SCAN rscan k7334 PREFIX s COUNT 2)"

expect_eq "BATCH replies per op (--no-raw)" \
    "$(printf '%s\n' '1) OK' '2) OK' '3) (integer) 1' '4) (integer) 0')" \
    "$(RT BATCH rcli PUT b1 one PUT b2 two DEL b1 DEL b1)"
expect_eq "BATCH result visible" "two" "$(R GET rcli b2)"
out=$(RT BATCH rcli PUT b3 three PUT '' empty-key)
expect_contains "BATCH with an empty key is BADKEY" "(error) BADKEY" "$out"
expect_eq "... and applied nothing" "0" "$(R EXISTS rcli b3)"
out=$(RT BATCH rcli PUT b3 three GET b3)
expect_contains "BATCH with an unknown op is ERR" "(error) ERR BATCH op 2: unknown op 'GET'" "$out"

info=$(R INFO)
expect_contains "INFO has the version" "actorkv_version:" "$info"
if [ -n "${ACTORKV_ETCD:-}" ]; then
    # Cluster mode (protocol.md, "Cluster mode"): no data directory, fsync policy or namespace
    # lines; a Cluster section about the etcd cluster the agent talks to.
    expect_contains "INFO says mode:cluster" "mode:cluster" "$info"
    expect_contains "INFO reaches etcd" "etcd_status:ok" "$info"
    expect_contains "INFO counts etcd's 3 members" "etcd_members:3" "$info"
    expect_eq "INFO has no fsync line in cluster mode" "" "$(printf '%s\n' "$info" | grep '^fsync:')"
else
    expect_contains "INFO has fsync:" "fsync:" "$info"
    expect_contains "INFO has the namespace line" "ns_rcli:keys=" "$info"

    # protocol.md's INFO example: its ns_config line is what the examples before it leave, on a
    # server of its own. Other scripts may share this one, use "config", or remove namespaces
    # (UNLINK), after which a new namespace's numbers go on from the highest removed one's.
    if [ -x "$ACTORKVD" ]; then
        DOC_DIR=$(mktemp -d /tmp/akvdoc.XXXXXX)
        "$ACTORKVD" --socket "$DOC_DIR/s" --data-dir "$DOC_DIR/data" </dev/null >"$DOC_DIR/server.log" 2>&1 &
        DOC_PID=$!
        also_on_exit 'kill -TERM "$DOC_PID" 2>/dev/null; wait_exit "$DOC_PID"; rm -rf "$DOC_DIR"'
        if wait_ping "$DOC_DIR/s" "$DOC_PID"; then
            D() { timeout "$T" redis-cli -s "$DOC_DIR/s" "$@" 2>&1; }
            for cmd in "PUT config motd hello" "PUT config theme dark" "BATCH config PUT k1 v1 DEL k1 PUT k2 v2" \
                       "BATCH config PUT k1 v1 JUMP k2" "DEL config theme missing"; do
                read -r -a words <<<"$cmd"
                D "${words[@]}" >/dev/null
            done
            documented=$(grep -m1 '^    ns_config:' "$ROOT/protocol.md" | sed 's/^ *ns_config://')
            expect_eq "protocol.md's ns_config line is a new server's after its examples" "$documented" \
                "$(D INFO | tr -d '\r' | grep '^ns_config:' | sed 's/^ns_config://')"
        else
            not_ok "a server of its own for protocol.md's INFO example started"
            sed 's/^/#   /' "$DOC_DIR/server.log"
        fi
    else
        note "skip: protocol.md's ns_config line (no actorkvd at $ACTORKVD to start a server of its own)"
    fi
fi

names=$(R NAMESPACES)
expect_contains "NAMESPACES lists rcli" $'\nrcli\n' $'\n'"$names"$'\n'
expect_contains "NAMESPACES lists rscan" $'\nrscan\n' $'\n'"$names"$'\n'

# Errors show their code: raw prints the line, --no-raw prefixes "(error)".
unknown_tail='; ActorKV keeps keys in namespaces: see protocol.md "Differences from Redis"'
expect_eq "unknown command (raw)" "ERR unknown command 'FOO'$unknown_tail" "$(R FOO bar)"
expect_eq "unknown command (--no-raw)" "(error) ERR unknown command 'FOO'$unknown_tail" "$(RT FOO bar)"
expect_contains "bad namespace is BADNS" "(error) BADNS namespace name may contain only" "$(RT GET a/b k)"
expect_contains "empty key is BADKEY" "(error) BADKEY" "$(RT PUT rcli '' v)"
expect_contains "bad cursor is BADCURSOR" "(error) BADCURSOR" "$(RT SCAN rcli nope)"
expect_contains "wrong arity is ERR" "(error) ERR wrong number of arguments for 'PUT'" "$(RT PUT rcli k)"

# The connection probes redis-cli and other Redis tools send: COMMAND answers an empty array;
# COMMAND DOCS an error, so that interactive redis-cli uses its own HELP table.
expect_eq "COMMAND answers an empty array" "(empty array)" "$(RT COMMAND)"
expect_contains "COMMAND DOCS is an error" "(error) ERR COMMAND DOCS is not supported" "$(RT COMMAND DOCS)"

# Interactive redis-cli, on a terminal (a pty; TERM=dumb keeps linenoise from asking the
# terminal for its cursor): it starts quietly, and HELP HSET prints redis-cli's own help (with an
# empty COMMAND DOCS it printed an empty line).
session=$(timeout "$T" python3 - "$SOCK" <<'PY'
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "dumb"
    os.execvp("redis-cli", ["redis-cli", "-s", sys.argv[1]])
out = b""
def read_until(needle, seconds=5):
    global out
    end = time.time() + seconds
    while needle not in out and time.time() < end:
        if select.select([fd], [], [], 0.05)[0]:
            try: data = os.read(fd, 65536)
            except OSError: return
            if not data: return
            out += data
prompt = b"> "
read_until(prompt)
for line in (b"HELP HSET", b"HSET rcli-interactive f v"):
    os.write(fd, line + b"\r")
    read_until(b"(integer)" if line.startswith(b"HSET") else b"group:")
os.write(fd, b"quit\r")
read_until(b"\0", 1)
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
PY
)
first_line=$(printf '%s\n' "$session" | head -1)
case "$first_line" in
    "redis $SOCK> HELP HSET") ok "interactive redis-cli starts quietly (its prompt first)" ;;
    *) not_ok "interactive redis-cli starts quietly (its prompt first)"; printf '%s\n' "$session" | head -5 | show ;;
esac
expect_contains "interactive HELP HSET prints redis-cli's help for HSET" "key field value" "$session"
expect_contains "... with its summary" "summary:" "$session"
expect_contains "interactive HSET runs" "(integer) 1" "$session"

# redis-cli --stat reads INFO's db0:keys, used_memory, connected_clients, blocked_clients,
# total_commands_processed and total_connections_received (it printed LLONG_MIN without them).
stat=$(timeout 3 script -qfc "redis-cli -s '$SOCK' --stat -i 1" /dev/null </dev/null 2>/dev/null | tr -d '\r' | sed -n 3p)
read -r stat_keys stat_mem stat_clients stat_blocked _ <<<"$stat"
case "$stat_mem" in
    *-*|'') not_ok "redis-cli --stat shows the memory used"; note "line: $stat" ;;
    *[0-9][BKMG]) ok "redis-cli --stat shows the memory used ($stat_mem)" ;;
    *) not_ok "redis-cli --stat shows the memory used"; note "line: $stat" ;;
esac
expect_eq "redis-cli --stat: no blocked clients" "0" "$stat_blocked"
check "redis-cli --stat: at least its own client connected" [ "${stat_clients:-0}" -ge 1 ]
if [ -z "${ACTORKV_ETCD:-}" ]; then
    check "redis-cli --stat counts the keys of every namespace (at least rcli's)" [ "${stat_keys:-0}" -ge 3 ]
fi

# The keyspace walks (--scan, --bigkeys, --memkeys) send Redis's keyspace commands (DBSIZE, SCAN
# without a namespace, TYPE), whose keys are the namespaces that hold keys (protocol.md
# "Namespaces as Redis hashes"): an emptied namespace is not one of them.
expect_eq "a namespace emptied by HDEL" "1" "$(R HSET rcli-gone f v; R HDEL rcli-gone f >/dev/null)"
before=$(R HGETALL rcli)
check "rcli holds keys to compare" [ -n "$before" ]
scan_out=$(R --scan); scan_status=$?
expect_eq "redis-cli --scan succeeds" "0" "$scan_status"
check "... listing rcli" grep -qx rcli <<<"$scan_out"
check "... and not the emptied rcli-gone" [ -z "$(grep -x rcli-gone <<<"$scan_out")" ]
expect_eq "... the namespaces KEYS * lists" "$(R KEYS '*' | sort)" "$(sort <<<"$scan_out")"
expect_eq "redis-cli --scan --pattern" "rcli" "$(R --scan --pattern 'rcl?')"
expect_eq "TYPE of a namespace with keys / emptied" "$(printf '%s\n' hash none)" "$(R TYPE rcli; R TYPE rcli-gone)"
hashes=$(grep -c . <<<"$scan_out")
expect_eq "DBSIZE counts them" "$hashes" "$(R DBSIZE)"
bigkeys=$(R --bigkeys)
expect_contains "redis-cli --bigkeys finds every one a hash" "$hashes hashs with" "$bigkeys"
memkeys=$(R --memkeys)
if [ -n "${ACTORKV_ETCD:-}" ]; then
    # Through an agent MEMORY USAGE is refused (the keys live in etcd): redis-cli warns, goes on.
    expect_contains "redis-cli --memkeys through an agent: MEMORY USAGE refused, with a warning" "MEMORY USAGE on" "$memkeys"
else
    expect_contains "redis-cli --memkeys sizes every one (MEMORY USAGE, protocol.md)" "$hashes hashs with" "$memkeys"
    check "... without a warning that MEMORY USAGE failed" [ -z "$(grep 'MEMORY USAGE on' <<<"$memkeys")" ]
fi
expect_eq "... and the data is untouched" "$before" "$(R HGETALL rcli)"
expect_eq "a hash named as Redis names keys, with ':'" "1" "$(R HSET rcli:user:1 name ada)"
expect_eq "redis-cli --scan --pattern finds it" "rcli:user:1" "$(R --scan --pattern 'rcli:user:*')"

# Commands from stdin, one per line, over one connection.
out=$(printf 'PUT rcli piped 1\nGET rcli piped\nDEL rcli piped\nGET rcli piped\n' | R)
expect_eq "several commands piped to redis-cli" "$(printf '%s\n' OK 1 1 '')" "$out"

# -r repeats a command.
expect_eq "-r 3 repeats the command" "$(printf '%s\n' PONG PONG PONG)" "$(R -r 3 PING)"

# FLUSHALL and FLUSHDB remove every namespace (protocol.md "FLUSHDB, FLUSHALL"): on a server of
# their own, not the one other scripts share (in cluster mode an agent with a prefix of its own,
# which it alone removes namespaces under). redis-py's flushdb()/flushall() too, when the
# virtual environment that .ci/run creates is there.
if [ -x "$ACTORKVD" ]; then
    FL_DIR=$(mktemp -d /tmp/akvflush.XXXXXX)
    if [ -n "${ACTORKV_ETCD:-}" ]; then
        "$ACTORKVD" --socket "$FL_DIR/s" --etcd "$ACTORKV_ETCD" --etcd-prefix "flush$$/" </dev/null >"$FL_DIR/server.log" 2>&1 &
    else
        "$ACTORKVD" --socket "$FL_DIR/s" --data-dir "$FL_DIR/data" </dev/null >"$FL_DIR/server.log" 2>&1 &
    fi
    FL_PID=$!
    also_on_exit 'kill -TERM "$FL_PID" 2>/dev/null; wait_exit "$FL_PID"; rm -rf "$FL_DIR"'
    if wait_ping "$FL_DIR/s" "$FL_PID"; then
        F() { timeout "$T" redis-cli -s "$FL_DIR/s" "$@" 2>&1; }
        F HSET fl-a f 1 >/dev/null; F PUT fl-b k v >/dev/null; F HSET fl-c f 1 >/dev/null; F HDEL fl-c f >/dev/null
        # An agent lists only namespaces that hold a key (protocol.md "Cluster mode"): not the emptied one.
        if [ -n "${ACTORKV_ETCD:-}" ]; then listed=$(printf '%s\n' fl-a fl-b); else listed=$(printf '%s\n' fl-a fl-b fl-c); fi
        expect_eq "the namespaces before FLUSHALL (one emptied)" "$listed" "$(F NAMESPACES)"
        expect_eq "redis-cli FLUSHALL" "OK" "$(F FLUSHALL)"
        expect_eq "... leaves no namespace" "" "$(F NAMESPACES)"
        expect_eq "... nothing for DBSIZE" "0" "$(F DBSIZE)"
        expect_eq "... and writes go on" "1" "$(F HSET fl-a g 2)"
        expect_eq "redis-cli FLUSHDB ASYNC" "OK" "$(F FLUSHDB ASYNC)"
        expect_eq "... removes it" "" "$(F HGETALL fl-a)"
        expect_contains "FLUSHDB with an unknown option is refused" "ERR syntax error" "$(F HSET fl-a g 2 >/dev/null; F FLUSHDB NOW)"
        expect_eq "... and removes nothing" "2" "$(F HGET fl-a g)"
        VENV=${REDISPY_VENV:-$ROOT/.build-venv}
        if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import redis' 2>/dev/null; then
            out=$(timeout "$T" "$VENV/bin/python" - "$FL_DIR/s" <<'PY' 2>&1
import sys, redis
r = redis.Redis(unix_socket_path=sys.argv[1])
r.hset("py-a", mapping={"f": "1"})
print(r.flushdb(), r.keys(), r.hset("py-b", "f", "1"), r.flushall(asynchronous=True), r.dbsize())
PY
)
            expect_eq "redis-py's flushdb() and flushall(asynchronous=True)" "True [] 1 True 0" "$out"
        else
            note "redis-py is not installed in $VENV: its flushdb() was not tried"
        fi
    else
        not_ok "a server of its own for FLUSHALL started"; sed 's/^/#   /' "$FL_DIR/server.log"
    fi
fi

finish
