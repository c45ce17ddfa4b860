#!/usr/bin/env bash
# `actorkv lock` from a shell, as README shows it: a command run under the lock (its exit status
# passed through, the fencing token in ACTORKV_LOCK_TOKEN), background loops that never overlap,
# the timeout exit code, and a holder killed with kill -9 (the lock stays held while its command
# runs, and is released when that ends). Also `actorkv put --ttl` and `pttl`, read back with
# redis-cli. Needs the built CLI: $ACTORKV_CLI, or <repo root>/.build/debug/actorkv.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool redis-cli redis-tools
use_server
CLI=${ACTORKV_CLI:-$ROOT/.build/debug/actorkv}
if [ ! -x "$CLI" ]; then not_ok "actorkv found at $CLI (swift build, or set ACTORKV_CLI)"; finish; fi

W=$(mktemp -d "${TMPDIR:-/tmp}/akvlk.XXXXXX")
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
    rm -rf "$W"
}
also_on_exit cleanup
kv() { timeout "$T" "$CLI" --socket "$SOCK" "$@"; }
rcli() { timeout "$T" redis-cli -s "$SOCK" "$@"; }

# A command under the lock: its status, its token, the key while held and after.
kv lock shlocks job -- sh -c 'exit 3'
expect_eq "lock passes the command's exit status through" 3 "$?"
kv lock shlocks job -- sh -c 'kill -KILL $$'
expect_eq "... and 128+N when signal N killed it" 137 "$?"
out=$(kv lock shlocks job -- sh -c 'echo "$ACTORKV_LOCK_TOKEN"; redis-cli -s "$SOCK" GETV shlocks job | tail -1')
token=${out%%$'\n'*}
expect_eq "ACTORKV_LOCK_TOKEN is the lock key's version while held" "$token" "${out#*$'\n'}"
case $token in ''|*[!0-9]*) not_ok "the token is a number: '$token'" ;; *) ok "the token is a number" ;; esac
expect_eq "the key is gone once the command has ended" 0 "$(rcli EXISTS shlocks job)"

# Four background loops of a read-increment-write of a file: never two at once.
echo 0 > "$W/count"
for w in 1 2 3 4; do
    (for _ in $(seq 10); do
        kv lock --timeout 60 shlocks counter -- sh -c 'n=$(cat "$0"); echo $((n + 1)) > "$0"' "$W/count" || exit 1
    done) &
    PIDS+=($!)
done
failed=0
for pid in "${PIDS[@]}"; do wait "$pid" || failed=$((failed + 1)); done
PIDS=()
expect_eq "4 loops x 10 locked rounds: every loop succeeded" 0 "$failed"
expect_eq "... and the count is exactly 40" 40 "$(cat "$W/count")"

# A holder in the background; another lock times out (exit 7) without running its command.
"$CLI" --socket "$SOCK" lock shlocks busy -- sh -c 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60' "$W/holder.pid" &
holder=$!
PIDS+=("$holder")
for _ in $(seq 200); do [ -s "$W/holder.pid" ] && break; sleep 0.05; done
kv lock --timeout 0.2 shlocks busy -- touch "$W/ran" 2>"$W/err"
status=$?
expect_eq "lock --timeout 0.2 on a held lock exits 7" 7 "$status"
check "... and does not run the command" test ! -e "$W/ran"
expect_contains "... and says why, naming the holder" "lock not acquired: key 'busy' in namespace 'shlocks' was held by another holder for the whole 0.2 s (held by " "$(cat "$W/err")"
expect_contains "the holder is named by the key's value" ":$holder" "$(rcli GET shlocks busy)"
# kill -9 of actorkv: its command still runs and keeps the lock; once the command dies too, it is free.
kill -9 "$holder"
wait "$holder" 2>/dev/null
kv lock --timeout 0 shlocks busy -- true 2>/dev/null
expect_eq "after kill -9 of actorkv, its running command still holds the lock (exit 7)" 7 "$?"
kill -9 "$(cat "$W/holder.pid")"
kv lock --timeout 20 shlocks busy -- touch "$W/ran"
expect_eq "once the command is gone too, the lock is released and taken (exit 0)" 0 "$?"
check "... and the command ran" test -e "$W/ran"

# put --ttl and pttl, seen by redis-cli too.
kv put --ttl 60 shttl k v
# In cluster mode a deadline is kept to the second: PTTL may count up to a second more.
most=$([ -n "${ACTORKV_ETCD:-}" ] && echo 61000 || echo 60000)
left=$(kv pttl shttl k)
if [ "$left" -gt 0 ] 2>/dev/null && [ "$left" -le "$most" ]; then ok "pttl after put --ttl 60: $left ms"; else not_ok "pttl after put --ttl 60: '$left'"; fi
left=$(rcli PTTL shttl k)
if [ "$left" -gt 0 ] 2>/dev/null && [ "$left" -le "$most" ]; then ok "redis-cli PTTL agrees"; else not_ok "redis-cli PTTL: '$left'"; fi
out=$(kv pttl shttl missing); status=$?
expect_eq "pttl of a missing key prints -2 and exits 1" "-2 1" "$out $status"
kv put --ttl 0.1 shttl short v
for _ in $(seq 200); do kv get shttl short >/dev/null || break; sleep 0.05; done
kv get shttl short >/dev/null
expect_eq "a key put with --ttl 0.1 expires (get exits 1)" 1 "$?"
finish
