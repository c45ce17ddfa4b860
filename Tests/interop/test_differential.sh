#!/usr/bin/env bash
# ActorKV against a real redis-server, command for command (clients/differential.py): random
# hash, keyspace and transaction commands, the same to both servers, on RESP2 and RESP3 and
# pipelined, then random inline lines; every reply must be Redis's but for what protocol.md
# "Differences from Redis" lists. The seed is
# printed; DIFF_SEED=N replays one, DIFF_COMMANDS sets the commands a round (default 10000; 4000 through an etcd agent).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool redis-server redis-server
use_server

W=$(mktemp -d "${TMPDIR:-/tmp}/akvdiff.XXXXXX")
redis-server --unixsocket "$W/redis.sock" --port 0 --save '' --appendonly no --dir "$W" \
    </dev/null >"$W/redis.log" 2>&1 &
REDIS_PID=$!
also_on_exit 'kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null; rm -rf "$W"'
if ! wait_ping "$W/redis.sock" "$REDIS_PID"; then
    not_ok "redis-server started"; sed 's/^/#   /' "$W/redis.log"; finish
fi
note "$(redis-server --version)"

# Through etcd (ACTORKV_ETCD), an agent of its own under a prefix of its own: the keyspace
# commands (KEYS, SCAN 0, NAMESPACES) list every namespace under the agent's prefix, a round trip
# per namespace, and the suites before leave hundreds of them under the shared agent's, which
# made each listing take a second (the run, past its time limit).
if [ -n "${ACTORKV_ETCD:-}" ]; then
    "$ACTORKVD" --socket "$W/agent.sock" --etcd "$ACTORKV_ETCD" --etcd-prefix "differential$$/" </dev/null >"$W/agent.log" 2>&1 &
    AGENT_PID=$!
    also_on_exit 'kill "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null'
    if ! wait_ping "$W/agent.sock" "$AGENT_PID"; then
        not_ok "an agent of the differential's own started"; sed 's/^/#   /' "$W/agent.log"; finish
    fi
    SOCK=$W/agent.sock
fi

# Through an etcd agent every write is a round trip to etcd: 10,000 commands a round took 40 s
# there (against 9 s locally), so it runs fewer. The time allowed grows with the commands, and
# under a sanitizer (ACTORKV_SANITIZER, Tests/sanitizers/run.sh), which slows the server.
if [ -n "${ACTORKV_ETCD:-}" ]; then
    commands=${DIFF_COMMANDS:-4000} limit=$((60 + ${DIFF_COMMANDS:-4000} / 20))
else
    commands=${DIFF_COMMANDS:-10000} limit=$((60 + ${DIFF_COMMANDS:-10000} / 100))
fi
[ -n "${ACTORKV_SANITIZER:-}" ] && limit=$((limit * 3))
relay "differential" "$limit" python3 "$INTEROP_DIR/clients/differential.py" "$SOCK" "$W/redis.sock" "$commands"
finish
