# Sourced by randomfield.sh and backup.sh: one server with one large hash, and another key.
#
# start_big_hash BIN FIELDS DIR starts BIN (an actorkvd) or, for `redis`, redis-server without
# persistence, on the socket DIR/s.sock (data in DIR), and waits for it; loads the namespace
# (hash) `big` with FIELDS fields `key:N` of 100-byte values through `redis-cli --pipe`; writes
# one more key, `other`, for another client to read. Sets S (the socket), SERVER_PID, and the
# array GET_OTHER (the arguments of a GET of that key).
start_big_hash() {
    local bin=$1 fields=$2 dir=$3 hset
    S=$dir/s.sock
    if [ "$bin" = redis ]; then
        redis-server --port 0 --unixsocket "$S" --save "" --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
        hset=HSET GET_OTHER=(GET other)
    else
        "$bin" --socket "$S" --data-dir "$dir/data" --snapshot-interval 0 2>"$dir/log" &
        hset=PUT GET_OTHER=(GET other k)
    fi
    SERVER_PID=$!
    for _ in $(seq 1 100); do [ -S "$S" ] && break; sleep 0.05; done
    python3 -c "
import sys
out = sys.stdout.buffer
for i in range($fields):
    key = b'key:%d' % i
    out.write(b'*4\r\n\$%d\r\n%s\r\n\$3\r\nbig\r\n\$%d\r\n%s\r\n\$100\r\n%s\r\n' % (len(b'$hset'), b'$hset', len(key), key, b'v' * 100))
" | redis-cli -s "$S" --pipe | tail -1
    if [ "$bin" = redis ]; then redis-cli -s "$S" SET other v >/dev/null; else redis-cli -s "$S" PUT other k v >/dev/null; fi
}
