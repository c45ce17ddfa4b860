#!/usr/bin/env bash
# Two processes share state through one server: Clients/examples/writer.py (Python) writes a
# counter and a status; Clients/examples/reader.sh (bash + nc or redis-cli) reads them.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool nc netcat-openbsd
need_tool python3 python3
use_server

EX=$ROOT/Clients/examples
W=$(mktemp -d "${TMPDIR:-/tmp}/akvsh.XXXXXX")

# 1. One after the other.
out=$(timeout 60 python3 "$EX/writer.py" --socket "$SOCK" --namespace share1 --count 25 2>&1)
expect_eq "writer.py runs" "writer: wrote 25 steps to namespace share1" "$out"
expect_eq "reader.sh (nc) sees the writer's final state" "counter=25 status=done 25" \
    "$(timeout 30 bash "$EX/reader.sh" --socket "$SOCK" --namespace share1)"
if command -v redis-cli >/dev/null 2>&1; then
    expect_eq "reader.sh (redis-cli) sees the same" "counter=25 status=done 25" \
        "$(timeout 30 bash "$EX/reader.sh" --socket "$SOCK" --namespace share1 --tool redis-cli)"
fi
expect_eq "reader.sh on a namespace nobody wrote" "counter= status=" \
    "$(timeout 30 bash "$EX/reader.sh" --socket "$SOCK" --namespace share-none)"

# 2. At the same time: the reader follows the writer until it is done.
timeout 120 python3 "$EX/writer.py" --socket "$SOCK" --namespace share2 --count 40 --delay 0.02 \
    > "$W/writer.out" 2>&1 &
writer=$!
timeout 120 bash "$EX/reader.sh" --socket "$SOCK" --namespace share2 --until-done 100 > "$W/reader.out" 2>&1
reader_status=$?
wait "$writer"
writer_status=$?
expect_eq "concurrent writer exits 0" 0 "$writer_status"
expect_eq "concurrent reader exits 0 (it saw done)" 0 "$reader_status"
expect_eq "the reader's last line is the final state" "counter=40 status=done 40" "$(tail -n 1 "$W/reader.out")"
# Every state the reader saw is consistent (counter and status from the same BATCH) and the
# counter never goes back.
bad=
previous=0
while IFS= read -r line; do
    case $line in
        "counter= status=starting"|"counter= status="|"counter=40 status=done 40") continue ;;
        counter=*" status=running "*)
            n=${line#counter=}; n=${n%% *}
            step=${line#* status=running }; step=${step%/*}
            if [ "$n" != "$step" ] || [ "$n" -lt "$previous" ]; then bad="$bad [$line]"; fi
            previous=$n ;;
        *) bad="$bad [$line]" ;;
    esac
done < "$W/reader.out"
if [ -z "$bad" ]; then ok "every state the reader saw was consistent and in order ($(wc -l < "$W/reader.out") states)"
else not_ok "every state the reader saw was consistent and in order"; note "$bad"; fi

# 3. The other way: the shell writes, Python reads.
reply=$(printf 'PUT share3 from-shell "hello from bash\\x00!"\r\n' | timeout "$T" nc -U -N "$SOCK" | tr -d '\r')
expect_eq "the shell stores a value" "+OK" "$reply"
out=$(SOCK="$SOCK" PYTHONPATH="$ROOT/Clients/python" timeout 30 python3 -c '
import os, actorkv
with actorkv.Client(os.environ["SOCK"]) as kv:
    print(repr(kv.get("share3", "from-shell")))
')
expect_eq "Python reads the shell's value" "b'hello from bash\\x00!'" "$out"

rm -rf "$W"
finish
