#!/usr/bin/env bash
# actorkvd's command line and start-up checks. Starts its own servers in a private temporary
# directory (SOCK is not used), and stops every one of them.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool nc netcat-openbsd
if [ ! -x "$ACTORKVD" ]; then not_ok "actorkvd found at $ACTORKVD"; finish; fi

W=$(mktemp -d /tmp/akvc.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        if is_running "$pid"; then kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
    done
    rm -rf "$W"
}
trap cleanup EXIT

# start NAME ARGS...: starts actorkvd in the background (log in $W/NAME.log); sets PID.
start() {
    local name=$1; shift
    "$ACTORKVD" "$@" </dev/null >"$W/$name.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
}

# run_fg NAME ARGS...: runs actorkvd in the foreground (bounded); sets STATUS and OUT.
run_fg() {
    local name=$1; shift
    timeout 30 "$ACTORKVD" "$@" </dev/null >"$W/$name.log" 2>&1
    STATUS=$?
    OUT=$(cat "$W/$name.log")
}

# stop_ok NAME PID SOCKET: SIGTERM; checks exit 0 and the socket removed.
stop_ok() {
    kill -TERM "$2"
    wait_exit "$2"
    local status=$?
    if [ $status -eq 0 ] && [ ! -e "$3" ]; then ok "$1 stops on SIGTERM: exit 0, socket removed"
    else not_ok "$1 stops on SIGTERM: exit 0, socket removed"; note "exit $status, socket $( [ -e "$3" ] && echo left || echo removed)"; fi
}

nc_get() { printf 'GET %s %s\r\n' "$2" "$3" | timeout "$T" nc -U -N "$1" | tr -d '\r'; }

# --help, --version, bad flags --------------------------------------------------------------
out=$(timeout 10 "$ACTORKVD" --help 2>&1); status=$?
expect_eq "--help exits 0" 0 "$status"
expect_contains "--help mentions --socket" "--socket" "$out"
expect_contains "--help mentions --allow-shared-data-dir" "--allow-shared-data-dir" "$out"
out=$(timeout 10 "$ACTORKVD" --version 2>&1); status=$?
expect_eq "--version exits 0" 0 "$status"
expect_contains "--version prints the version" "actorkvd " "$out"

run_fg unknown --no-such-flag
expect_eq "an unknown flag exits 2" 2 "$STATUS"
expect_contains "... and names it" "unknown option '--no-such-flag'" "$OUT"
run_fg missing --socket
expect_eq "a flag without its value exits 2" 2 "$STATUS"
expect_contains "... and says so" "--socket needs a value" "$OUT"
run_fg badfsync --fsync sometimes --socket "$W/x.sock" --data-dir "$W/x"
expect_eq "--fsync with a bad policy exits 2" 2 "$STATUS"
expect_contains "... and lists the policies" "--fsync must be always, everysec or no (got 'sometimes')" "$OUT"
run_fg badexec --execution threads --socket "$W/x.sock" --data-dir "$W/x"
expect_eq "--execution with a bad mode exits 2" 2 "$STATUS"
expect_contains "... and lists the modes" "--execution must be loop or pool (got 'threads')" "$OUT"
run_fg badmode --socket-mode 999 --socket "$W/x.sock" --data-dir "$W/x"
expect_eq "--socket-mode that is not octal exits 2" 2 "$STATUS"
check "bad flags create nothing" test ! -e "$W/x" -a ! -e "$W/x.sock"

# First server; default modes ---------------------------------------------------------------
A_SOCK=$W/a.sock
start a --socket "$A_SOCK" --data-dir "$W/a-data" --fsync always
A=$PID
if wait_ping "$A_SOCK" "$A"; then ok "server A starts"; else not_ok "server A starts"; sed 's/^/#   /' "$W/a.log"; finish; fi
expect_eq "the socket is mode 0600 by default" 600 "$(stat -c %a "$A_SOCK")"
expect_eq "a new data directory is created 0700" 700 "$(stat -c %a "$W/a-data")"
expect_eq "server A stores a value" "+OK" "$(printf 'PUT cli k from-a\r\n' | timeout "$T" nc -U -N "$A_SOCK" | tr -d '\r')"

# A second server on the same socket fails and leaves the first alone.
run_fg second --socket "$A_SOCK" --data-dir "$W/b-data"
if [ "$STATUS" -ne 0 ] && [ "$STATUS" -ne 124 ]; then ok "a second server on the same socket exits non-zero ($STATUS)"
else not_ok "a second server on the same socket exits non-zero"; note "status $STATUS"; fi
expect_contains "... with a clear message" "another server is already listening on $A_SOCK" "$OUT"
check "... and the first keeps its socket" test -S "$A_SOCK"
expect_eq "... and keeps serving" $'$6\nfrom-a' "$(nc_get "$A_SOCK" cli k)"

# A server that may not connect to a socket cannot tell whether it is alive: it must leave it
# alone (a build that took any failed connect for "stale" replaced a live root server's socket).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    P=$(mktemp -d /tmp/akvp.XXXXXX)
    chmod 711 "$P"; mkdir "$P/grp"; chgrp 65534 "$P/grp"; chmod 770 "$P/grp"
    cp "$ACTORKVD" "$P/actorkvd"; chmod 755 "$P/actorkvd"
    start root-owner --socket "$P/grp/x.sock" --data-dir "$W/p-data"
    R=$PID
    if wait_ping "$P/grp/x.sock" "$R"; then
        timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$P/actorkvd" \
            --socket "$P/grp/x.sock" --data-dir "$P/grp/nobody-data" </dev/null >"$W/nobody.log" 2>&1
        STATUS=$?; OUT=$(cat "$W/nobody.log")
        if [ "$STATUS" -ne 0 ] && [ "$STATUS" -ne 124 ]; then ok "a server that may not connect to a live socket exits non-zero ($STATUS)"
        else not_ok "a server that may not connect to a live socket exits non-zero"; note "status $STATUS" "$OUT"; fi
        expect_contains "... saying it cannot tell" "cannot tell whether a server listens on $P/grp/x.sock" "$OUT"
        expect_eq "... and the live server still answers on its socket" "+PONG" "$(printf 'PING\r\n' | timeout "$T" nc -U -N "$P/grp/x.sock" | tr -d '\r')"
    else
        not_ok "the root server for the permission check starts"; sed 's/^/#   /' "$W/root-owner.log"
    fi
    # A server stopping removes its socket file only if it is still its own.
    rm -f "$P/grp/x.sock"
    start successor --socket "$P/grp/x.sock" --data-dir "$W/q-data"
    Q=$PID
    if wait_ping "$P/grp/x.sock" "$Q"; then
        kill -TERM "$R"; wait_exit "$R"
        expect_eq "a server whose socket file was replaced exits 0 on SIGTERM" 0 "$?"
        expect_eq "... and leaves the new server's socket in place" "+PONG" "$(printf 'PING\r\n' | timeout "$T" nc -U -N "$P/grp/x.sock" | tr -d '\r')"
        stop_ok "the successor" "$Q" "$P/grp/x.sock"
    else
        not_ok "a server starts on a path whose socket file was removed"; sed 's/^/#   /' "$W/successor.log"
    fi
    rm -rf "$P"
fi

# A second server on the same data directory fails too.
run_fg samedata --socket "$W/c.sock" --data-dir "$W/a-data"
if [ "$STATUS" -ne 0 ] && [ "$STATUS" -ne 124 ]; then ok "a second server on the same data directory exits non-zero ($STATUS)"
else not_ok "a second server on the same data directory exits non-zero"; note "status $STATUS"; fi
expect_contains "... with a clear message" "in use by process $A" "$OUT"
check "... and does not leave a socket" test ! -e "$W/c.sock"

# Stale socket: SIGKILL leaves the socket file; the next server removes it and starts.
{ kill -9 "$A"; wait "$A"; } 2>/dev/null
check "a SIGKILLed server leaves its socket file" test -S "$A_SOCK"
start a2 --socket "$A_SOCK" --data-dir "$W/a-data"
A2=$PID
if wait_ping "$A_SOCK" "$A2"; then ok "a new server replaces the stale socket and starts"
else not_ok "a new server replaces the stale socket and starts"; sed 's/^/#   /' "$W/a2.log"; fi
expect_contains "... and logs that it removed it" "removed stale socket $A_SOCK" "$(cat "$W/a2.log")"
expect_eq "... and has the data acknowledged before the kill (fsync always)" $'$6\nfrom-a' "$(nc_get "$A_SOCK" cli k)"
stop_ok "the restarted server" "$A2" "$A_SOCK"

# A path that exists and is not a socket is never replaced.
echo "precious" > "$W/file"
run_fg notsocket --socket "$W/file" --data-dir "$W/f-data"
expect_eq "a regular file at the socket path: exit 1" 1 "$STATUS"
expect_contains "... with a clear message" "exists and is not a socket" "$OUT"
expect_eq "... and the file is untouched" precious "$(cat "$W/file")"

# --socket-mode ----------------------------------------------------------------------------
start mode --socket "$W/m.sock" --data-dir "$W/m-data" --socket-mode 660
M=$PID
if wait_ping "$W/m.sock" "$M"; then
    expect_eq "--socket-mode 660 gives 660" 660 "$(stat -c %a "$W/m.sock")"
else
    not_ok "--socket-mode 660 gives 660"; sed 's/^/#   /' "$W/mode.log"
fi
stop_ok "the --socket-mode server" "$M" "$W/m.sock"

# A data directory other users can write to ------------------------------------------------
mkdir "$W/shared"
chmod 0777 "$W/shared"
run_fg shared --socket "$W/s.sock" --data-dir "$W/shared"
expect_eq "a data directory with mode 0777 is refused (exit 1)" 1 "$STATUS"
expect_contains "... with a clear message" "writable by other users" "$OUT"
check "... and no socket is left" test ! -e "$W/s.sock"
start shared2 --socket "$W/s.sock" --data-dir "$W/shared" --allow-shared-data-dir
S2=$PID
if wait_ping "$W/s.sock" "$S2"; then ok "--allow-shared-data-dir accepts it"
else not_ok "--allow-shared-data-dir accepts it"; sed 's/^/#   /' "$W/shared2.log"; fi
stop_ok "the shared-data-dir server" "$S2" "$W/s.sock"

# A socket directory every user can write to, without the sticky bit ----------------------
mkdir "$W/open-dir"
chmod 0777 "$W/open-dir"
run_fg opendir --socket "$W/open-dir/s.sock" --data-dir "$W/o-data"
expect_eq "a socket in a world-writable, non-sticky directory is refused (exit 1)" 1 "$STATUS"
expect_contains "... with a clear message" "writable by every user and not sticky" "$OUT"
check "... and no socket is created there" test ! -e "$W/open-dir/s.sock"

# A socket directory another user owns: that user could swap the socket (or a symbolic link)
# in under the server. Only the server's own user or root may own it.
if [ "$(id -u)" = 0 ]; then
    mkdir "$W/their-dir"; chown 65534:65534 "$W/their-dir"; chmod 0755 "$W/their-dir"
    run_fg theirdir --socket "$W/their-dir/s.sock" --data-dir "$W/t-data"
    expect_eq "a socket in a directory another user owns is refused (exit 1)" 1 "$STATUS"
    expect_contains "... with a clear message" "is owned by uid 65534: its owner could replace the socket" "$OUT"
    check "... and no socket is created there" test ! -e "$W/their-dir/s.sock"
    mkdir -m 0700 "$W/their-data"; chown 65534:65534 "$W/their-data"
    run_fg theirdata --socket "$W/td.sock" --data-dir "$W/their-data"
    expect_eq "a data directory another user owns is refused (exit 1)" 1 "$STATUS"
    expect_contains "... with a clear message" "is owned by uid 65534, not by this process's uid 0" "$OUT"
fi

# Other start-up refusals ------------------------------------------------------------------
long=$W/$(printf 'x%.0s' $(seq 1 110)).sock
run_fg longpath --socket "$long" --data-dir "$W/l-data"
expect_eq "a socket path over 107 bytes: exit 1" 1 "$STATUS"
expect_contains "... with a clear message" "longer than the 107 bytes" "$OUT"
run_fg nodir --socket "$W/no/such/dir/s.sock" --data-dir "$W/n-data"
expect_eq "a socket in a missing directory: exit 1" 1 "$STATUS"
expect_contains "... with a clear message" "does not exist" "$OUT"

# --check: an offline check of a data directory ----------------------------------------------
start chk --socket "$W/k.sock" --data-dir "$W/k-data"
K=$PID
if wait_ping "$W/k.sock" "$K"; then
    printf 'PUT good a 1\r\nPUT bad a 1\r\nPUT bad b 2\r\n' | timeout "$T" nc -U -N "$W/k.sock" >/dev/null
    run_fg chk-busy --check --data-dir "$W/k-data"
    expect_eq "--check on a directory a server holds: exit 1" 1 "$STATUS"
    expect_contains "... with a clear message" "in use by process $K" "$OUT"
    stop_ok "the server checked" "$K" "$W/k.sock"
else
    not_ok "the server to check starts"; sed 's/^/#   /' "$W/chk.log"
fi
run_fg chk-ok --check --data-dir "$W/k-data"
expect_eq "--check on a healthy directory: exit 0" 0 "$STATUS"
expect_contains "... one line per namespace" "namespace bad: ok: 2 keys" "$OUT"
expect_contains "... and the verdict" "2 namespace(s) in $W/k-data: all would open" "$OUT"
# A byte changed inside the first of two records: damage a crash cannot explain.
printf '\x5a' | dd of="$W/k-data/bad/000001.log" bs=1 seek=20 conv=notrunc 2>/dev/null
before=$(md5sum "$W"/k-data/*/* | md5sum)
run_fg chk-bad --check --data-dir "$W/k-data"
expect_eq "--check with a corrupt namespace: exit 1" 1 "$STATUS"
expect_contains "... names the file and offset" "namespace bad: UNAVAILABLE: $W/k-data/bad/000001.log is corrupt at byte offset 8" "$OUT"
expect_contains "... and still reports the healthy one" "namespace good: ok: 1 keys" "$OUT"
expect_eq "... and changes no file" "$before" "$(md5sum "$W"/k-data/*/* | md5sum)"
# A log segment missing between two kept ones (history the snapshot covers): a gap, refused.
start chk-gap --socket "$W/g.sock" --data-dir "$W/gap-data"
G=$PID
if wait_ping "$W/g.sock" "$G"; then
    # Values of 1 MiB, so that each compaction seals its segment (one of small records goes on
    # taking writes across compactions while history needs all it holds).
    mib=$(head -c 1048576 /dev/zero | tr '\0' x)
    for i in 1 2 3; do
        printf '*4\r\n$3\r\nPUT\r\n$4\r\njobs\r\n$1\r\na\r\n$1048576\r\n%s\r\nCOMPACT jobs\r\n' "$mib"
    done | timeout "$T" nc -U -N "$W/g.sock" >/dev/null
    stop_ok "the server whose history is cut" "$G" "$W/g.sock"
else
    not_ok "the server whose history is cut starts"; sed 's/^/#   /' "$W/chk-gap.log"
fi
rm -f "$W/gap-data/jobs/000002.log"
before=$(md5sum "$W"/gap-data/jobs/* | md5sum)
run_fg chk-gap-check --check --data-dir "$W/gap-data"
expect_eq "--check with a log segment missing between kept ones: exit 1" 1 "$STATUS"
expect_contains "... names the files around the gap and the change missing" "namespace jobs: UNAVAILABLE: $W/gap-data/jobs: the log has a gap between $W/gap-data/jobs/000001.log (its last change is sequence 1) and $W/gap-data/jobs/000003.log (its first is sequence 3): log segment 000002.log is missing, and change 2 with it; the snapshot (through sequence 3) holds what the missing changes did" "$OUT"
expect_eq "... and changes no file" "$before" "$(md5sum "$W"/gap-data/jobs/* | md5sum)"
run_fg chk-none --check --data-dir "$W/no-such-data"
expect_eq "--check on a missing directory: exit 1" 1 "$STATUS"
expect_contains "... with a clear message" "no data directory at $W/no-such-data" "$OUT"
check "... and creates nothing" test ! -e "$W/no-such-data"

# Out of file descriptors ---------------------------------------------------------------------
# With an open files limit far below what --max-clients needs, the server lowers its client limit
# so that descriptors are always left (running out of them aborts a process in the Dispatch
# library's once-a-second read of /proc): connections past it are refused with -MAXCLIENTS, and
# it serves again once clients leave.
hold_clients() {  # SOCKET: 150 connections held, then one more, then all closed and one more
    timeout 60 python3 - "$1" <<'PY'
import socket, sys, time
path = sys.argv[1]
held = []
for _ in range(150):                    # more than the 120 descriptors the server may have
    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path); held.append(s)
time.sleep(1.0)                         # a spinning loop would log thousands of lines by now
extra = socket.socket(socket.AF_UNIX); extra.settimeout(10); extra.connect(path)
print("extra:", extra.recv(200).decode().strip())
for s in held: s.close()
time.sleep(0.5)
again = socket.socket(socket.AF_UNIX); again.settimeout(10); again.connect(path)
again.sendall(b"PING\r\n")
print("again:", again.recv(100).decode().strip())
PY
}
(ulimit -n 120; exec "$ACTORKVD" --socket "$W/fd.sock" --data-dir "$W/fd-data" --max-clients 1000) </dev/null >"$W/fd.log" 2>&1 &
F=$!; PIDS+=("$F")
if wait_ping "$W/fd.sock" "$F"; then
    expect_contains "a limit below what --max-clients needs is warned about at start" "is below the 3304 that --max-clients 1000 and --max-namespaces 1024 need: namespaces are limited to 16, and clients to 54 (more get -MAXCLIENTS), so that 32 descriptors are always left" "$(cat "$W/fd.log")"
    expect_contains "... and CONFIG GET maxclients gives the limit in force" "54" "$(redis-cli -s "$W/fd.sock" CONFIG GET maxclients)"
    out=$(hold_clients "$W/fd.sock")
    expect_contains "a client past the lowered limit gets -MAXCLIENTS" "extra: -MAXCLIENTS max number of clients reached" "$out"
    expect_contains "... and the server serves again once clients leave" "again: +PONG" "$out"
    check "... with descriptors to spare: none ran out" sh -c "! grep -q 'out of file descriptors' '$W/fd.log'"
    stop_ok "the server under a low open files limit" "$F" "$W/fd.sock"
else
    not_ok "the server with a low open files limit starts"; sed 's/^/#   /' "$W/fd.log"
fi
# Should the descriptors run out all the same (here: 70 of the 120 taken before the server
# starts, which its budget does not know of), a connection past them gets -MAXCLIENTS too; the
# loop neither spins on the listener nor floods the log, and serves again once clients leave.
(ulimit -n 120; for fd in $(seq 20 89); do eval "exec $fd</dev/null"; done
 exec "$ACTORKVD" --socket "$W/fd2.sock" --data-dir "$W/fd2-data" --max-clients 1000) </dev/null >"$W/fd2.log" 2>&1 &
F=$!; PIDS+=("$F")
if wait_ping "$W/fd2.sock" "$F"; then
    out=$(hold_clients "$W/fd2.sock")
    expect_contains "a client past the descriptors gets -MAXCLIENTS" "extra: -MAXCLIENTS the server is out of file descriptors" "$out"
    expect_contains "... and the server serves again once clients leave" "again: +PONG" "$out"
    lines=$(grep -c "out of file descriptors" "$W/fd2.log")
    if [ "$lines" -ge 1 ] && [ "$lines" -le 3 ]; then ok "... logged once per shortage, not per attempt ($lines lines)"
    else not_ok "... logged once per shortage, not per attempt"; note "$lines lines"; fi
    expect_contains "... and says when it accepts again" "accepting connections again" "$(cat "$W/fd2.log")"
    stop_ok "the server short of descriptors" "$F" "$W/fd2.sock"
else
    not_ok "the server with descriptors taken before it starts"; sed 's/^/#   /' "$W/fd2.log"
fi

# Signals during shutdown ----------------------------------------------------------------------
# Hundreds of SIGTERMs while compactions and writes are in flight and the grace is 0: every later
# signal and every late reply must wake the loop's own eventfd, never a descriptor number the
# process has since reused for a log segment or snapshot (a build that closed the eventfd when
# the loop stopped wrote 8 bytes into data files here and left namespaces refused as corrupt).
if command -v redis-cli >/dev/null && command -v python3 >/dev/null; then
    python3 - "$W" <<'PY'
import sys
w = sys.argv[1]
with open(w + "/load.resp", "wb") as f:
    for n in range(30):
        for k in range(3000):
            args = [b"PUT", b"n%02d" % n, b"key%05d" % k, b"v" * 100]
            f.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
with open(w + "/burst.txt", "wb") as f:
    for n in range(30):
        f.write(b"COMPACT n%02d\r\nPUT new%02d k v\r\n" % (n, n))
PY
    for round in 1 2; do
        start sig --socket "$W/g.sock" --data-dir "$W/g-data-$round" --shutdown-grace 0 --execution pool
        G=$PID
        if wait_ping "$W/g.sock" "$G"; then
            timeout 60 redis-cli -s "$W/g.sock" --pipe < "$W/load.resp" >/dev/null
            (cat "$W/burst.txt"; sleep 1) | timeout "$T" nc -U "$W/g.sock" >/dev/null &
            sleep 0.02
            for _ in $(seq 1 400); do kill -TERM "$G" 2>/dev/null || break; sleep 0.0005; done
            wait_exit "$G"
            expect_eq "a storm of SIGTERMs during shutdown (round $round): exit 0" 0 "$?"
            run_fg sig-check --check --data-dir "$W/g-data-$round"
            OUT=$(printf '%s\n' "$OUT" | grep -v ': ok: ')
            expect_contains "... and every namespace still opens" "all would open" "$OUT"
        else
            not_ok "the server for the signal storm starts"; sed 's/^/#   /' "$W/sig.log"
        fi
    done
else
    not_ok "redis-cli and python3 are installed (needed for the signal storm)"
fi

# SHUTDOWN, as redis-cli and redis-py send it ----------------------------------------------
# The asker's connection ends with no reply once the server has shut down: when the client
# returns, the socket is gone and the log says so, and a new server can take the data directory.
# shutdown_by NAME COMMAND...: starts a server on $W/NAME.sock, writes a field, runs COMMAND
# (with {} replaced by the socket) and checks the client's exit and output, then the server's.
shutdown_by() {
    local name=$1; shift
    local sock=$W/$name.sock out rc left status
    start "$name" --socket "$sock" --data-dir "$W/$name-data"
    local pid=$PID
    if ! wait_ping "$sock" "$pid"; then not_ok "$name: the server starts"; sed 's/^/#   /' "$W/$name.log"; return; fi
    timeout "$T" redis-cli -s "$sock" HSET h f kept >/dev/null
    out=$(timeout 30 "${@//\{\}/$sock}" 2>&1); rc=$?
    [ -e "$sock" ] && left=yes || left=no
    grep -q "shut down cleanly (SHUTDOWN from connection [0-9]*, uid $(id -u), pid" "$W/$name.log" && logged=yes || logged=no
    wait_exit "$pid"; status=$?
    expect_eq "$name: the client returns 0 with nothing printed, once the socket is gone and the log says who asked; the server exits 0" \
        "0::no:yes:0" "$rc:$out:$left:$logged:$status"
    start "$name-again" --socket "$sock" --data-dir "$W/$name-data"
    if wait_ping "$sock" "$PID"; then
        expect_eq "$name: the field written before SHUTDOWN is there after a restart" kept "$(timeout "$T" redis-cli -s "$sock" HGET h f)"
        stop_ok "$name's successor" "$PID" "$sock"
    else
        not_ok "$name: a server starts again on the data directory"; sed 's/^/#   /' "$W/$name-again.log"
    fi
}
if command -v redis-cli >/dev/null; then
    shutdown_by shut-cli redis-cli -s {} SHUTDOWN
    shutdown_by shut-cli-nosave redis-cli -s {} SHUTDOWN NOSAVE NOW
    VENV_PY=${REDISPY_VENV:-$ROOT/.build-venv}/bin/python
    if [ -x "$VENV_PY" ] && "$VENV_PY" -c 'import redis' 2>/dev/null; then
        # redis-py's shutdown() takes the closed connection as success (None) and raises otherwise.
        shutdown_by shut-redispy "$VENV_PY" -c 'import redis, sys; redis.Redis(unix_socket_path=sys.argv[1]).shutdown(nosave=True)' {}
    else
        not_ok "redis-py is installed in .build-venv (needed for its shutdown())"
    fi
else
    not_ok "redis-cli is installed (needed for SHUTDOWN)"
fi

finish
