#!/usr/bin/env bash
# Reader half of the ActorKV sharing example: a shell script reads the state that writer.py
# publishes, with nothing but nc (netcat-openbsd), or redis-cli.
#
#   ./reader.sh [--socket PATH] [--namespace NS] [--tool nc|redis-cli] [--until-done SECONDS]
#
# Prints one line "counter=N status=TEXT" (empty when a key is not there). With --until-done
# it keeps reading, printing each change, until the status starts with "done" or the seconds
# run out (exit 1 then).
set -u

sock=${SOCK:-./actorkv.sock}
ns=demo
tool=nc
until_done=

while [ $# -gt 0 ]; do
    case $1 in
        --socket) sock=$2; shift 2 ;;
        --namespace) ns=$2; shift 2 ;;
        --tool) tool=$2; shift 2 ;;
        --until-done) until_done=$2; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "reader: unknown option $1" >&2; exit 2 ;;
    esac
done

# read_state: sets $counter and $status from the server.
read_state() {
    if [ "$tool" = redis-cli ]; then
        # --raw prints each bulk reply on its own line (an empty line for a missing key).
        local out
        out=$(printf 'GET %s counter\nGET %s status\n' "$ns" "$ns" | timeout 10 redis-cli -s "$sock" --raw) || return 1
        { IFS= read -r counter; IFS= read -r status; } <<< "$out"
        return 0
    fi
    # Two inline requests in one connection; `nc -N` half-closes after sending, and the server
    # closes once it has answered. Each reply is "$<len>" then the value, or "$-1" if missing
    # (this simple parser assumes the values hold no newline).
    local reply header value
    reply=$(printf 'GET %s counter\r\nGET %s status\r\n' "$ns" "$ns" | timeout 10 nc -U -N "$sock") || return 1
    local values=()
    while IFS= read -r header; do
        header=${header%$'\r'}
        case $header in
            '$-1') values+=("") ;;
            '$'*) IFS= read -r value; values+=("${value%$'\r'}") ;;
            -*) echo "reader: server error: $header" >&2; return 1 ;;
            *) echo "reader: unexpected reply: $header" >&2; return 1 ;;
        esac
    done <<< "$reply"
    [ ${#values[@]} -eq 2 ] || return 1
    counter=${values[0]}
    status=${values[1]}
}

if [ -z "$until_done" ]; then
    read_state || exit 1
    echo "counter=$counter status=$status"
    exit 0
fi

deadline=$((SECONDS + until_done))
last=
while [ $SECONDS -le $deadline ]; do
    if read_state; then
        line="counter=$counter status=$status"
        [ "$line" != "$last" ] && echo "$line"
        last=$line
        case $status in done*) exit 0 ;; esac
    fi
    sleep 0.05
done
echo "reader: gave up after ${until_done}s (last: $last)" >&2
exit 1
