#!/usr/bin/env bash
# Reader half of the ActorKV sharing example: a shell script reads the state that writer.py
# publishes, with nothing but nc (netcat-openbsd), or redis-cli.
#
#   ./reader.sh [--socket PATH] [--namespace NS] [--tool nc|redis-cli] [--until-done SECONDS]
#   (the socket: --socket, else $ACTORKV_SOCKET, else ./actorkv.sock, as the clients)
#
# Prints one line "counter=N status=TEXT" (empty when a key is not there). With --until-done
# it keeps reading, printing each change, until the status starts with "done" or the seconds
# run out (exit 1 then). A reading that fails (no server, an error reply) says why on stderr;
# a single reading then exits 1, --until-done tries again.
set -u

sock=${ACTORKV_SOCKET:-./actorkv.sock}
ns=demo
tool=nc
until_done=

while [ $# -gt 0 ]; do
    case $1 in
        --socket) sock=$2; shift 2 ;;
        --namespace) ns=$2; shift 2 ;;
        --tool) tool=$2; shift 2 ;;
        --until-done) until_done=$2; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "reader: unknown option $1" >&2; exit 2 ;;
    esac
done

# read_state: sets $counter and $status from the server.
read_state() {
    if [ "$tool" = redis-cli ]; then
        # redis-cli exits 0 even when it cannot connect or the server answers with an error,
        # and --raw prints an error's text like a value. So ask for the quoted form (--no-raw):
        # one line per reply, "value" (escaped), (nil) or (error) CODE message.
        local out line
        out=$(printf 'GET %s counter\nGET %s status\n' "$ns" "$ns" | timeout 10 redis-cli -s "$sock" --no-raw) || {
            echo "reader: redis-cli failed or timed out on $sock" >&2; return 1; }
        if [ -z "$out" ]; then  # it printed why on standard error
            echo "reader: no reply from $sock (redis-cli could not connect)" >&2; return 1
        fi
        local values=()
        while IFS= read -r line; do
            case $line in
                '(nil)') values+=("") ;;
                '"'*'"')
                    # Undo redis-cli's quoting: \" first, then printf %b for \\ \n \r \t \a \b \xHH.
                    line=${line:1:${#line}-2}
                    printf -v line '%b' "${line//\\\"/\"}"
                    values+=("$line") ;;
                '(error) '*) echo "reader: server error: ${line#(error) }" >&2; return 1 ;;
                *) echo "reader: unexpected reply: $line" >&2; return 1 ;;
            esac
        done <<< "$out"
        [ ${#values[@]} -eq 2 ] || { echo "reader: expected 2 replies, got ${#values[@]}" >&2; return 1; }
        counter=${values[0]}
        status=${values[1]}
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
