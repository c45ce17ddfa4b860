#!/usr/bin/env bash
# Cluster mode on a real local etcd cluster: two agents (two sockets, as two machines would
# have) over one 3-member cluster. Checks that what one agent writes the other reads, with
# versions, guarded writes, counters and transactions atomic across agents; that CHANGES through
# an agent take a namespace through the states a local server's do, on the same random writes
# (changes_equivalence.py); that ephemeral keys
# go when their connection ends or their agent is killed (within --ephemeral-ttl); that killing
# one etcd member under load loses no acknowledged write; that with two members down commands
# get -UNAVAILABLE and writes resume when one returns; that --acl binds local clients; that
# FLUSHALL removes the namespaces of its agent's prefix alone.
#
#   Tests/Cluster/test_cluster.sh            (needs etcd, redis-cli, nc; ACTORKVD as in Tests/interop)
# Prints `ok`/`not ok` lines; exits non-zero if any check failed.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../interop/lib.sh
. "$HERE/../interop/lib.sh"
need_tool etcd
need_tool redis-cli
need_tool nc
need_tool curl

WORK=$(mktemp -d /tmp/akvc.XXXXXX)
BASE=${ACTORKV_ETCD_BASE_PORT:-23890}
AGENT_PIDS=()
cleanup() {
    for pid in "${AGENT_PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
    bash "$HERE/etcd-cluster.sh" stop "$WORK/etcd"
    rm -rf "$WORK"
}
trap cleanup EXIT
ENDPOINTS=$(bash "$HERE/etcd-cluster.sh" start "$WORK/etcd" "$BASE") || { not_ok "a 3-member etcd cluster started"; finish; }
ok "a 3-member etcd cluster started ($ENDPOINTS)"
PREFIX="t$$/"

# start_agent NAME [ARGS...]: starts an agent on $WORK/NAME.sock; sets AGENT_PID.
start_agent() {
    local name=$1; shift
    "$ACTORKVD" --socket "$WORK/$name.sock" --etcd "$ENDPOINTS" --etcd-prefix "$PREFIX" --ephemeral-ttl 2 "$@" \
        </dev/null >>"$WORK/$name.log" 2>&1 &
    AGENT_PID=$!
    AGENT_PIDS+=("$AGENT_PID")
    wait_ping "$WORK/$name.sock" "$AGENT_PID" || { not_ok "agent $name started"; sed 's/^/#   /' "$WORK/$name.log"; finish; }
}
start_agent a; A_PID=$AGENT_PID
start_agent b; B_PID=$AGENT_PID
A="$WORK/a.sock"; B="$WORK/b.sock"
ca() { timeout "$T" redis-cli -s "$A" "$@"; }
cb() { timeout "$T" redis-cli -s "$B" "$@"; }

# --- shared data, versions, counters, transactions
expect_eq "PUT through A" OK "$(ca PUT cfg theme dark)"
expect_eq "GET through B reads A's write" dark "$(cb GET cfg theme)"
v=$(ca PUT cfg mode fast IFVERSION 0)
expect_eq "GETV through B gives the version A's guarded PUT returned" "$(printf 'fast\n%s' "$v")" "$(cb GETV cfg mode)"
expect_eq "a guarded PUT with a stale version through B writes nothing" "" "$(cb PUT cfg mode slow IFVERSION $((v - 1)))"
expect_eq "... and the value stays" fast "$(ca GET cfg mode)"
v2=$(cb PUT cfg mode slow IFVERSION "$v")
[ "$v2" -gt "$v" ] && ok "a guarded PUT with the current version through B succeeds with a higher version" ||
    not_ok "guarded PUT with the current version (got '$v2' after '$v')"

for agent in "$A" "$B"; do
    for _ in 1 2 3; do
        (for _ in $(seq 1 40); do redis-cli -s "$agent" INCR cnt hits >/dev/null; done) &
    done
done
wait_jobs() { local j; for j in $(jobs -p); do case " ${AGENT_PIDS[*]} " in *" $j "*) ;; *) wait "$j" ;; esac; done; }
wait_jobs
expect_eq "240 concurrent INCRs through both agents add up" 240 "$(cb GET cnt hits)"
expect_eq "INCR of a value that is not an integer" "ERR value is not an integer" "$(ca INCR cfg theme 2>&1)"

exec_out=$(printf 'MULTI\r\nPUT tx a 1\r\nINCR tx n 5\r\nGET tx a\r\nEXEC\r\n' | timeout "$T" nc -U -N "$A" | tr -d '\r' | tr '\n' ' ')
expect_eq "MULTI/EXEC through A applies the queue as one transaction" "+OK +QUEUED +QUEUED +QUEUED *3 +OK :5 \$1 1 " "$exec_out"
expect_eq "BATCH with a failing guard writes nothing" "" "$(cb BATCH tx PUT a 2 IFVERSION n 1)"
expect_eq "... the batch's PUT was not applied" 1 "$(ca GET tx a)"
expect_eq "COUNT through B" 2 "$(cb COUNT tx)"
expect_eq "SCAN through B pages in key order" "$(printf '0\na\n1\nn\n5')" "$(cb SCAN tx 0 COUNT 10)"
expect_contains "NAMESPACES through B lists the namespaces with keys" "tx" "$(cb NAMESPACES)"
# Names that sort next to one another's keys and markers (`<prefix>ns/…`, then `<prefix>ns0`):
# the listing steps over each namespace and its marker at once, and must miss none; one emptied
# (its keys deleted, its marker written) is not listed.
for n in ls ls-b ls.b ls0 ls00 ls0b ls:x lsz; do ca HSET "$n" f 1 >/dev/null; done
ca HSET ls0 g 1 >/dev/null; ca HDEL ls0 g >/dev/null; ca HDEL ls f >/dev/null
expect_eq "KEYS through B lists exactly the namespaces with keys, in order, past their markers" \
    "ls-b ls.b ls0 ls00 ls0b ls:x lsz" "$(cb KEYS 'ls*' | tr '\n' ' ' | sed 's/ $//')"
expect_eq "DBSIZE through B counts them" "$(cb KEYS '*' | wc -l)" "$(cb DBSIZE)"
# watch_then NS [CMD...]: on one connection to A, WATCH NS; then CMD through B; then MULTI, PUT w a x,
# EXEC on A. Prints EXEC's reply header: *1 (applied) or *-1 (aborted: a watched namespace changed).
watch_then() {
    local ns=$1 pid; shift
    rm -f "$WORK/wx"; mkfifo "$WORK/wx"
    timeout "$T" nc -U "$A" <"$WORK/wx" >"$WORK/wx.out" &
    pid=$!
    exec 8>"$WORK/wx"
    printf 'WATCH %s\r\n' "$ns" >&8
    for _ in $(seq 1 50); do grep -q OK "$WORK/wx.out" && break; sleep 0.1; done
    [ $# -gt 0 ] && cb "$@" >/dev/null
    printf 'MULTI\r\nPUT w a x\r\nEXEC\r\nQUIT\r\n' >&8
    exec 8>&-
    wait "$pid"
    tr -d '\r' <"$WORK/wx.out" | sed -n 4p
}
ca PUT w b 1 >/dev/null
expect_eq "WATCH, nothing written meanwhile: EXEC applies" "*1" "$(watch_then w)"
expect_eq "WATCH, then a PUT in the namespace through B: EXEC applies nothing" "*-1" "$(watch_then w PUT w b 2)"
expect_eq "WATCH, then a DEL in the namespace through B: EXEC applies nothing" "*-1" "$(watch_then w DEL w b)"
expect_eq "WATCH, then a write to another namespace: EXEC applies" "*1" "$(watch_then w PUT other z 1)"
expect_eq "WATCH of another namespace written through B meanwhile: EXEC applies nothing" "*-1" "$(watch_then w2 PUT w2 q 1)"
expect_eq "WATCH of another namespace, another written through B: EXEC applies" "*1" "$(watch_then w2 PUT other z 2)"
# Each kind of write through B breaks the WATCH (a put, a txn, a lease), and a delete of an
# absent key, which writes nothing, does not.
ca PUT w e 1 >/dev/null
for write in "HSET w f 1 g 2" "INCR w n" "PUT w b 3 PX 60000" "PUT w c 1 IFVERSION 0" "HEXPIRE w 60 FIELDS 1 e" "BATCH w PUT d 1 DEL b"; do
    expect_eq "WATCH, then $write through B: EXEC applies nothing" "*-1" "$(watch_then w $write)"
done
expect_eq "WATCH, then a DEL of an absent key through B: EXEC applies" "*1" "$(watch_then w DEL w nosuchkey)"
expect_contains "INFO shows the cluster's members and leader" "etcd_members:3" "$(ca INFO)"
big=$WORK/big; head -c 2000000 /dev/zero | tr '\0' x >"$big"
expect_contains "a value over etcd's request limit gets -TOOBIG" "TOOBIG" "$(timeout "$T" redis-cli -s "$A" -x PUT cfg big <"$big" 2>&1)"

# --- CHANGES across agents: in order, gapless, resumable after an agent restart
AKV="$(dirname "$ACTORKVD")/actorkv"
revision() { ca INFO | sed -n 's/^etcd_revision://p' | tr -d '\r'; }
# lines FILE N: waits (up to 20 s) until FILE has N lines.
lines() { local i; for i in $(seq 1 200); do [ "$(wc -l <"$1")" -ge "$2" ] && return 0; sleep 0.1; done; return 1; }
start=$(revision)
"$AKV" --socket "$B" --timeout 30 changes --from "$start" feed >"$WORK/f1" 2>"$WORK/f1.err" &
F1=$!
for i in $(seq 1 30); do ca PUT feed "k$i" "v$i" >/dev/null; done
ca DEL feed k3 >/dev/null
ca BATCH feed PUT x 1 PUT y 2 >/dev/null
lines "$WORK/f1" 33 && ok "a follower through B sees the 33 changes written through A" ||
    not_ok "follower through B: $(wc -l <"$WORK/f1") of 33 lines ($(cat "$WORK/f1.err"))"
expected=$( (for i in $(seq 1 30); do printf 'k%s\tv%s\n' "$i" "$i"; done; printf 'k3\t\\N\nx\t1\ny\t2\n') )
expect_eq "... in the order they were written, each once" "$expected" "$(cut -f2- "$WORK/f1")"
expect_eq "... with increasing sequences, the BATCH's two keys sharing one" \
    "$(cut -f1 "$WORK/f1" | sort -n | uniq | wc -l) $(cut -f1 "$WORK/f1" | sort -n | tr '\n' ' ')" "32 $(cut -f1 "$WORK/f1" | tr '\n' ' ')"
kill -9 "$B_PID"; wait "$B_PID" 2>/dev/null
for i in $(seq 31 40); do ca PUT feed "k$i" "v$i" >/dev/null; done
start_agent b; B_PID=$AGENT_PID
lines "$WORK/f1" 43 && ok "the follower resumes after agent B was killed and restarted: the 10 writes made meanwhile arrive" ||
    not_ok "after B's restart: $(wc -l <"$WORK/f1") of 43 lines ($(cat "$WORK/f1.err"))"
expect_eq "... each once, in order" "$(for i in $(seq 31 40); do printf 'k%s\tv%s\n' "$i" "$i"; done)" "$(tail -n +34 "$WORK/f1" | cut -f2-)"
coproc EPH { nc -U "$A"; }
printf 'PUT feed session alive EPHEMERAL\r\n' >&"${EPH[1]}"
read -r -t "$T" reply <&"${EPH[0]}"
printf 'QUIT\r\n' >&"${EPH[1]}"
lines "$WORK/f1" 45 && expect_eq "a follower through B sees A's ephemeral key deleted when its connection closed" \
    "$(printf 'session\talive\nsession\t\\N')" "$(tail -n 2 "$WORK/f1" | cut -f2-)" || not_ok "the ephemeral key's put and delete did not reach the follower"
snap=$(timeout 3 "$AKV" --socket "$B" changes --snapshot feed)
expect_eq "CHANGES SNAPSHOT through B: every key at one revision" "$(cb COUNT feed)" "$(printf '%s\n' "$snap" | wc -l)"
expect_eq "... all at the same sequence" 1 "$(printf '%s\n' "$snap" | cut -f1 | sort -u | wc -l)"
out=$(printf 'CHANGES feed FROM %s\r\n' "$(( $(revision) + 100 ))" | timeout "$T" nc -U -N "$A")
expect_contains "CHANGES FROM a future revision is refused" "after the last sequence" "$out"
rev=$(revision)
curl -s -X POST "${ENDPOINTS%%,*}/v3/kv/compaction" -d "{\"revision\":\"$rev\"}" >/dev/null
out=$(printf 'CHANGES feed FROM %s\r\nPING\r\n' "$start" | timeout "$T" nc -U -N "$B" | tr -d '\r' | tr '\n' ' ')
expect_eq "CHANGES FROM a revision etcd compacted: -COMPACTED with the oldest it holds, the connection stays usable" \
    "-COMPACTED oldest available sequence is $((rev + 1)) +PONG " "$out"

# --- followers on the agent's event loop: many of them, and one that does not read for a while
python3 - "$A" "$B" "$B_PID" >"$WORK/many" 2>&1 <<'PY'
import re, socket, sys, time
a, b, pid = sys.argv[1], sys.argv[2], sys.argv[3]
def connect(path, command):
    s = socket.socket(socket.AF_UNIX); s.connect(path); s.settimeout(30); s.sendall(command); return s
def read_until(s, needle):
    data = b""
    while needle not in data:
        chunk = s.recv(65536)
        if not chunk: break
        data += chunk
    return data
followers = [connect(b, b"CHANGES many\r\n") for _ in range(200)]
for f in followers: read_until(f, b"changes\r\n$4\r\nmany\r\n")
time.sleep(0.5)
threads = [l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("Threads:")][0]
w = connect(a, b"PUT many hello world\r\n"); read_until(w, b"+OK\r\n")
seen = sum(1 for f in followers if b"hello" in read_until(f, b"hello"))
for f in followers: f.close()
print(f"threads {threads} seen {seen}")
slow = connect(b, b"CHANGES many\r\n"); read_until(slow, b"changes\r\n$4\r\nmany\r\n")
value = b"v" * 1024
w.sendall(b"".join(b"PUT many k%04d %s\r\n" % (i, value) for i in range(3000)))
assert read_until(w, b"+OK\r\n" * 3000).count(b"+OK") == 3000
time.sleep(2)  # the agent's buffer for the slow follower fills; etcd holds the rest
data = b""
while data.count(b"\r\n$1024\r\n") < 3000:
    chunk = slow.recv(1 << 20)
    if not chunk or b"-LAGGING" in chunk or b"-UNAVAILABLE" in chunk: break
    data += chunk
keys = re.findall(rb"\$5\r\n(k\d{4})\r\n\$1024\r\n", data)
print("slow", len(keys), "in order" if keys == [b"k%04d" % i for i in range(3000)] else "out of order", "errors" if b"-" + b"LAGGING" in data else "")
PY
read -r _ threads _ seen <"$WORK/many"
[ "${seen:-0}" = 200 ] && ok "200 followers through B each see A's write" || not_ok "200 followers: $(cat "$WORK/many")"
[ "${threads:-999}" -lt 40 ] && ok "... served by the agent's event loop: $threads threads, not one per follower" ||
    not_ok "agent B runs ${threads:-?} threads with 200 followers"
expect_eq "a follower that did not read while 3 MB of changes were written gets all 3000, in order (etcd held them back)" \
    "slow 3000 in order" "$(sed -n 2p "$WORK/many" | sed 's/ *$//')"

"$AKV" --socket "$A" lock locks L -- sh -c "sleep 1.5; echo first >>'$WORK/order'" &
HOLD=$!
for _ in $(seq 1 50); do [ -n "$(cb GET locks L)" ] && break; sleep 0.1; done
"$AKV" --socket "$B" lock --timeout 20 locks L -- sh -c "echo second >>'$WORK/order'"
rc=$?
wait "$HOLD"
expect_eq "actorkv lock through B waits for A's holder (it follows the lock's changes), then runs" "0 first second" "$rc $(tr '\n' ' ' <"$WORK/order" | sed 's/ $//')"

# --- CHANGES through agent B against CHANGES of a local server, on the same random writes
"$ACTORKVD" --socket "$WORK/local.sock" --data-dir "$WORK/local-data" </dev/null >>"$WORK/local.log" 2>&1 &
LOCAL_PID=$!
if wait_ping "$WORK/local.sock" "$LOCAL_PID"; then
    relay "CHANGES through an agent and locally" 120 python3 "$HERE/changes_equivalence.py" "$WORK/local.sock" "$B" 600
else
    not_ok "a local actorkvd started"; sed 's/^/#   /' "$WORK/local.log"
fi
kill -TERM "$LOCAL_PID" 2>/dev/null; wait "$LOCAL_PID" 2>/dev/null

# --- locks and ephemeral keys
coproc HOLDER { nc -U "$A"; }
printf 'PUT locks job-42 holder-a IFVERSION 0 EPHEMERAL\r\n' >&"${HOLDER[1]}"
read -r -t "$T" reply <&"${HOLDER[0]}"
[[ "$reply" == :* ]] && ok "a lock taken through A (PUT IFVERSION 0 EPHEMERAL)" || not_ok "lock through A (reply '$reply')"
expect_eq "the lock excludes a taker through B" "" "$(cb PUT locks job-42 holder-b IFVERSION 0 EPHEMERAL)"
timeout "$T" "$(dirname "$ACTORKVD")/actorkv" --socket "$B" lock --timeout 0 locks job-42 -- true >/dev/null 2>&1
[ $? -ne 0 ] && ok "actorkv lock through B fails while A's holder has the lock" || not_ok "actorkv lock through B must fail while held"
printf 'QUIT\r\n' >&"${HOLDER[1]}"
[ -n "${HOLDER_PID:-}" ] && wait "$HOLDER_PID" 2>/dev/null
sleep 0.3
expect_eq "the lock is gone once its connection closed" "" "$(cb GET locks job-42)"
timeout "$T" "$(dirname "$ACTORKVD")/actorkv" --socket "$B" lock --timeout 0 locks job-42 -- true
[ $? -eq 0 ] && ok "actorkv lock through B succeeds once it is free" || not_ok "actorkv lock through B once free"

# --- ephemeral keys with a deadline (a lock with a TTL), PTTL and PEXPIRE across agents
coproc HOLDER3 { nc -U "$A"; }
printf 'PUT locks ttl-lock holder-a IFVERSION 0 EPHEMERAL PX 1500\r\nPUT locks ttl-long x EPHEMERAL PX 60000\r\nPUT locks plain-eph x EPHEMERAL\r\nPUT locks doomed x EPHEMERAL\r\n' >&"${HOLDER3[1]}"
replies=""
for _ in 1 2 3 4; do read -r -t "$T" reply <&"${HOLDER3[0]}"; replies="$replies ${reply%$'\r'}"; done
[[ "$replies" =~ ^\ :[0-9]+\ \+OK\ \+OK\ \+OK$ ]] && ok "EPHEMERAL with PX through A: a lock with a TTL is taken" || not_ok "EPHEMERAL PX through A (replies '$replies')"
p=$(cb PTTL locks ttl-lock)
[ "$p" -gt 0 ] 2>/dev/null && [ "$p" -le 2500 ] && ok "PTTL through B shows its deadline ($p ms)" || not_ok "PTTL through B of the 1.5 s lock: '$p'"
p=$(cb PTTL locks ttl-long)
[ "$p" -gt 55000 ] 2>/dev/null && [ "$p" -le 61000 ] && ok "... and of the 60 s key ($p ms)" || not_ok "PTTL through B of the 60 s key: '$p'"
expect_eq "PTTL through B of an ephemeral key without deadline is -1, as locally" -1 "$(cb PTTL locks plain-eph)"
expect_contains "PEXPIRE through B of a key A's connection owns is refused" "another agent" "$(cb PEXPIRE locks plain-eph 60000 2>&1)"
expect_eq "PEXPIRE through another connection of A keeps the owner" 1 "$(ca PEXPIRE locks plain-eph 60000)"
cb HSET locks field-b 1 >/dev/null
expect_contains "HEXPIRE through B of fields, one of them A's connection's, is refused" "another agent" "$(cb HEXPIRE locks 600 FIELDS 2 field-b plain-eph 2>&1)"
expect_eq "... whole: the other field got no deadline" -1 "$(cb HTTL locks FIELDS 1 field-b)"
expect_contains "... and in MULTI through B, refused whole" "another agent" \
    "$(printf 'MULTI\nHEXPIRE locks 900 FIELDS 1 field-b\nHEXPIRE locks 900 FIELDS 1 plain-eph\nEXEC\n' | timeout "$T" redis-cli -s "$B" 2>&1)"
expect_eq "... nothing applied" -1 "$(cb HTTL locks FIELDS 1 field-b)"
expect_eq "HEXPIRE through another connection of A of the same fields: both changed (the key of A's connection keeps its owner: below)" "1 1" "$(ca HEXPIRE locks 600 FIELDS 2 field-b plain-eph | tr '\n' ' ' | sed 's/ $//')"
cb HDEL locks field-b >/dev/null
expect_eq "PEXPIRE 0 through B deletes A's ephemeral key, as locally" "1 " "$(cb PEXPIRE locks doomed 0) $(cb GET locks doomed)"
gone=""
for _ in $(seq 1 40); do [ -z "$(cb GET locks ttl-lock)" ] && { gone=1; break; }; sleep 0.1; done
[ -n "$gone" ] && ok "the lock's TTL ran out while its connection lives: gone through B" || not_ok "the 1.5 s lock is still there after 4 s"
expect_eq "... the connection's other keys stay" "x x" "$(cb GET locks ttl-long) $(cb GET locks plain-eph)"
printf 'QUIT\r\n' >&"${HOLDER3[1]}"
[ -n "${HOLDER3_PID:-}" ] && wait "$HOLDER3_PID" 2>/dev/null
sleep 0.3
expect_eq "its connection closed: its key with a deadline, and the one PEXPIRE gave one, are gone" "" "$(cb GET locks ttl-long)$(cb GET locks plain-eph)"

coproc HOLDER2 { nc -U "$A"; }
printf 'PUT live agent-a-is-up yes EPHEMERAL\r\nPUT live leased yes EPHEMERAL EX 600\r\n' >&"${HOLDER2[1]}"
read -r -t "$T" reply <&"${HOLDER2[0]}"
read -r -t "$T" reply2 <&"${HOLDER2[0]}"
expect_eq "an ephemeral key through A, and one with a 10-minute deadline" $'+OK\r +OK\r' "$reply $reply2"
expect_eq "... is seen through B" yes "$(cb GET live agent-a-is-up)"
kill -9 "$A_PID"; wait "$A_PID" 2>/dev/null
gone=""
for _ in $(seq 1 100); do [ -z "$(cb GET live agent-a-is-up)$(cb GET live leased)" ] && { gone=1; break; }; sleep 0.1; done
[ -n "$gone" ] && ok "kill -9 of agent A: its ephemeral keys are gone within the TTL (2 s), the one with a deadline too" || not_ok "ephemeral keys of a killed agent still there after 10 s"
[ -n "${HOLDER2_PID:-}" ] && kill "$HOLDER2_PID" 2>/dev/null
start_agent a; A_PID=$AGENT_PID

# --- an etcd member killed under load: nothing acknowledged is lost
"$AKV" --socket "$B" --timeout 30 changes load >"$WORK/f3" 2>"$WORK/f3.err" &
F3=$!
sleep 0.5
acked=$WORK/acked
(for i in $(seq 1 400); do r=$(redis-cli -s "$A" PUT load "k$i" "$i" 2>/dev/null); [ "$r" == OK ] && echo "k$i"; done >"$acked") &
LOADER=$!
sleep 0.5
kill -9 "$(cat "$WORK/etcd/m1.pid")"
wait "$LOADER"
n=$(wc -l <"$acked")
[ "$n" -ge 300 ] && ok "writes continue while one member is down ($n of 400 acknowledged)" || not_ok "only $n of 400 writes acknowledged with one member down"
lost=0
while read -r k; do [ "$(cb GET load "$k")" == "${k#k}" ] || lost=$((lost + 1)); done <"$acked"
expect_eq "no acknowledged write lost after a member was killed" 0 "$lost"
lines "$WORK/f3" "$n"
missing=$(cut -f2 "$WORK/f3" | sort | comm -13 - <(sort "$acked") | wc -l)
expect_eq "a follower through B saw every acknowledged write while the member died (its watch moved on)" 0 "$missing"
expect_eq "... each once" "$(wc -l <"$WORK/f3")" "$(cut -f2 "$WORK/f3" | sort -u | wc -l)"
kill "$F1" "$F3" 2>/dev/null

# --- two members down: UNAVAILABLE; writes resume when one returns
mkfifo "$WORK/f4in"
nc -U "$B" <"$WORK/f4in" >"$WORK/f4" &
F4=$!
exec 7>"$WORK/f4in"
printf 'CHANGES cfg\r\n' >&7
for _ in $(seq 1 50); do grep -q synced "$WORK/f4" && break; sleep 0.1; done
kill -9 "$(cat "$WORK/etcd/m2.pid")"
sleep 1.5
# A write made once the survivor knows it has no leader is refused before it is proposed
# (UNAVAILABLE: nothing applied), not held until a timeout leaves its outcome unknown (IOERR).
# One made in the moment before it noticed may still get IOERR: try again, never OK.
for _ in 1 2 3 4 5; do
    out=$(timeout 30 redis-cli -s "$A" PUT cfg down yes 2>&1)
    case "$out" in IOERR*) sleep 1 ;; *) break ;; esac
done
case "$out" in UNAVAILABLE*) ok "with two of three members down a write is refused, nothing applied ($out)" ;; *) not_ok "write with no quorum: '$out'" ;; esac
expect_contains "with two members down a read gets -UNAVAILABLE" "UNAVAILABLE" "$(timeout 30 redis-cli -s "$B" GET cfg theme 2>&1)"
bash "$HERE/etcd-cluster.sh" member "$WORK/etcd" 2
resumed=""
for _ in $(seq 1 100); do [ "$(redis-cli -s "$A" PUT cfg back yes 2>/dev/null)" == OK ] && { resumed=1; break; }; sleep 0.2; done
[ -n "$resumed" ] && ok "writes resume once a member returns" || not_ok "writes did not resume within 20 s of a member returning"
expect_eq "... and are read through B" yes "$(cb GET cfg back)"
for _ in $(seq 1 100); do grep -q back "$WORK/f4" && break; sleep 0.1; done
expect_contains "a follower through B that lived through the lost quorum gets the write made once it returned" \
    "$(printf 'back\r\n$3\r\nyes')" "$(cat "$WORK/f4")"
exec 7>&-
kill "$F4" 2>/dev/null
bash "$HERE/etcd-cluster.sh" member "$WORK/etcd" 1

# --- namespace permissions bind local clients in cluster mode too
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    printf 'uid:65534  pub  read\n' >"$WORK/acl"
    start_agent c --acl "$WORK/acl" --socket-mode 666
    C="$WORK/c.sock"
    chmod 755 "$WORK"
    ca PUT pub notice hello >/dev/null
    nobody() { timeout "$T" setpriv --reuid=65534 --regid=65534 --clear-groups redis-cli -s "$C" "$@" 2>&1; }
    expect_eq "--acl: a granted uid reads through the agent" hello "$(nobody GET pub notice)"
    expect_contains "--acl: the same uid may not write" "NOPERM" "$(nobody PUT pub notice changed)"
    expect_contains "--acl: nor read another namespace" "NOPERM" "$(nobody GET cfg theme)"
else
    note "--acl checks skipped: they need root and setpriv (CI has both)"
fi

# --- a deadline on a whole namespace (Redis's EXPIRE of a hash) is refused through an agent,
# nothing applied, alone or in MULTI (protocol.md "A deadline on a whole namespace")
expect_eq "HSET through A" 1 "$(ca HSET sess user alice)"
expect_contains "EXPIRE of a namespace through A is refused" "not available in cluster mode" "$(ca EXPIRE sess 60 2>&1)"
expect_contains "... and TTL" "not available in cluster mode" "$(cb TTL sess 2>&1)"
out=$(printf 'MULTI\r\nHSET sess cart 3\r\nEXPIRE sess 60\r\nEXEC\r\n' | timeout "$T" nc -U -N "$A")
expect_contains "... in MULTI: EXEC refused" "not available in cluster mode" "$out"
expect_eq "... nothing applied: the fields as they were, PEXPIRE of a key still works" "$(printf 'user\nalice\n1')" \
    "$(cb HGETALL sess; ca PEXPIRE sess user 60000)"

# --- WAITAOF through an agent: etcd acknowledged the write from a quorum's disks already
expect_eq "WAITAOF 1 0 0 after a write through A: 1 local, 0 replicas" "$(printf '1\n1\n0')" "$(ca HSET durable f v; ca WAITAOF 1 0 0)"
expect_contains "... numreplicas 1 refused" "no replicas" "$(ca WAITAOF 1 1 0 2>&1)"

# --- RENAME through an agent is refused, nothing changed (protocol.md "RENAME, RENAMENX")
expect_contains "RENAME through A is refused" "not available in cluster mode" "$(ca RENAME durable renamed 2>&1)"
expect_eq "... nothing changed: B reads the field under the old name, none under the new" "$(printf 'v\n0')" "$(cb HGET durable f; cb EXISTS renamed)"
expect_contains "COPY through A is refused" "not available in cluster mode" "$(ca COPY durable copied 2>&1)"
expect_eq "... nothing changed: B finds no copy" "0" "$(cb EXISTS copied)"
expect_contains "MEMORY USAGE through A is refused, saying where the keys are" "held by the etcd cluster" "$(ca MEMORY USAGE durable 2>&1)"
expect_eq "... and MEMORY HELP answers" "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" "$(ca MEMORY HELP | head -1)"

# --- FLUSHALL through one agent removes every namespace of its prefix, for both agents; an
# agent of another prefix on the same cluster keeps its own
"$ACTORKVD" --socket "$WORK/other.sock" --etcd "$ENDPOINTS" --etcd-prefix "other$$/" </dev/null >>"$WORK/other.log" 2>&1 &
AGENT_PIDS+=("$!")
if wait_ping "$WORK/other.sock" "$!"; then
    co() { timeout "$T" redis-cli -s "$WORK/other.sock" "$@"; }
    expect_eq "an agent of another prefix writes" OK "$(co PUT elsewhere k kept)"
    before=$(cb NAMESPACES | grep -c .)
    [ "$before" -ge 2 ] && ok "B lists the namespaces written so far ($before)" || not_ok "B lists $before namespaces"
    expect_eq "FLUSHALL through A" OK "$(timeout 60 redis-cli -s "$A" FLUSHALL)"
    expect_eq "... B lists no namespace" "" "$(cb NAMESPACES)"
    expect_eq "... nor a key of them" "" "$(cb GET cfg theme)"
    expect_eq "... the other prefix's namespace is kept" kept "$(co GET elsewhere k)"
    expect_eq "... and a write through B after it is read through A" "$(printf '1\nv')" "$(cb HSET after f v; ca HGET after f)"
else
    not_ok "an agent with another prefix started"; sed 's/^/#   /' "$WORK/other.log"
fi

# --- SHUTDOWN through an agent stops that agent as SIGTERM does; the connection ends once it has
out=$(ca SHUTDOWN NOSAVE 2>&1); rc=$?
wait "$A_PID"; status=$?
expect_eq "SHUTDOWN through agent A: redis-cli prints nothing (no reply, the connection closed)" "0:" "$rc:$out"
[ "$status" = 0 ] && [ ! -e "$A" ] && grep -q "shut down cleanly (SHUTDOWN from connection" "$WORK/a.log" &&
    ok "... agent A exited 0, its socket removed, its log naming the SHUTDOWN" ||
    { not_ok "agent A after SHUTDOWN: exit $status"; tail -5 "$WORK/a.log" | sed 's/^/#   /'; }
expect_eq "... agent B still serves" PONG "$(cb PING)"

for pid in "${AGENT_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
finish
