#!/usr/bin/env python3
"""Sequential round trips of one client: actorkvd's cluster-mode agent against etcd's v3 JSON
gateway for the same operations (issue #23). Python 3 standard library only.

Usage (Benchmarks/cluster.sh starts the cluster and the agent, then runs this):
    cluster_bench.py --socket SOCK --etcd http://127.0.0.1:PORT [--prefix bench/] [--ops N] [--quick]

Per operation, N round trips on each side (default 2000; --quick: 200), in 10 alternating
blocks (agent first in even blocks, etcd first in odd ones), over the same etcd keys
(<prefix>bench/k<i>, namespace "bench"), each op waiting for its answer:
  PUT  agent `PUT bench k<i> <16 B>` (RESP, Unix socket)  | POST /v3/kv/put  (keep-alive http.client)
  GET  agent `GET bench k<i>`                              | POST /v3/kv/range
  TXN  agent `PUT bench k<i> <16 B> IFVERSION <version>`   | POST /v3/kv/txn (compare mod_revision
                                                             EQUAL, request_put)
and, in the same blocks, two more sides:
  lean   the same requests to etcd over a raw socket, written by hand and checked by byte search
         (no http.client, no json): the least a client spends per round trip;
  relay  (GET only) a do-nothing agent: a child process of this script answering `GET ns key` on
         a Unix socket with a lean range read, one client at a time: the least any local agent
         adds (a Unix-socket hop and a process wake-up in front of etcd's round trip).
Every reply is checked (values read back, guarded writes succeeded); any error raises. Prints two
Markdown tables: against the http.client side, ops/s, p50 and p99 latency (µs), the agent's
overhead on p50 and on the mean, this client's own CPU time per op on each side (http.client and
json cost more than RESP), and the overhead on the mean once that CPU time is taken out of both
sides; then against the lean side, the agent's and the relay's overhead on p50 and mean.
"""
import argparse, base64, gc, http.client, json, socket, statistics, subprocess, sys, time
from urllib.parse import urlparse

NS = "bench"


class Resp:
    """A RESP connection to the agent: commands out as arrays of bulk strings, replies parsed."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.reply()

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def more(self):
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("agent closed the connection")
        self.buf += data

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError("agent error reply: " + rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.more()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply line %r" % line)


class Gateway:
    """etcd's v3 JSON gateway over one keep-alive HTTP/1.1 connection."""

    def __init__(self, url):
        u = urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def post(self, path, body):
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError("etcd %s: HTTP %d %s" % (path, r.status, data[:300]))
        return json.loads(data)


class LeanGateway:
    """etcd's gateway over a raw keep-alive socket: the request bytes written by hand, the answer
    read by its Content-Length and checked by byte search, no json module. The least a client
    can spend per round trip, for the agent's overhead against etcd itself."""

    def __init__(self, url):
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = ("%s:%d" % (u.hostname, u.port)).encode()

    def post(self, path, body):
        """POSTs `body` (bytes of JSON); returns the answer's body (bytes), raising unless 200."""
        self.sock.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                          % (path.encode(), self.host, len(body), body))
        buf = b""
        while True:
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if sep:
                length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                if len(rest) >= length:
                    if not head.startswith(b"HTTP/1.1 200"):
                        raise RuntimeError("etcd %s: %r" % (path, buf[:300]))
                    return rest[:length]
            data = self.sock.recv(65536)
            if not data:
                raise RuntimeError("etcd closed the connection")
            buf += data


def serve_relay(path, url, prefix):
    """A do-nothing agent: answers `GET ns key` (RESP) on the Unix socket `path` with the value
    of a range read of <prefix>ns/key through one LeanGateway, one client at a time. What any
    local agent costs at least: a Unix-socket hop in front of etcd's round trip."""
    import os
    gw = LeanGateway(url)
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        reader = Resp.__new__(Resp)
        reader.sock, reader.buf = conn, b""
        try:
            while True:
                args = reader.reply()   # the request: an array of bulk strings
                key = args[1] + b"/" + args[2]
                body = gw.post("/v3/kv/range", b'{"key":"%s"}' % base64.b64encode(prefix + key))
                value = body.split(b'"value":"', 1)[1].split(b'"', 1)[0] if b'"value":"' in body else None
                if value is None:
                    conn.sendall(b"$-1\r\n")
                else:
                    v = base64.b64decode(value)
                    conn.sendall(b"$%d\r\n%s\r\n" % (len(v), v))
        except (RuntimeError, OSError):
            conn.close()


def b64(b):
    return base64.b64encode(b).decode()


def timed(block):
    """Runs the block's ops; returns (latencies, wall time, this process's CPU time), in ns."""
    lat = []
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    for op in block:
        s = time.perf_counter_ns()
        op()
        lat.append(time.perf_counter_ns() - s)
    return lat, time.perf_counter_ns() - t0, time.process_time_ns() - c0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--etcd", required=True, help="the etcd member the agent talks to first (its --etcd list's first URL)")
    p.add_argument("--prefix", default="bench/")
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="--ops 200")
    p.add_argument("--serve-relay", metavar="SOCK", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve_relay:
        serve_relay(a.serve_relay, a.etcd, a.prefix.encode())
        return
    n = 200 if a.quick else a.ops
    blocks = a.blocks
    if n < blocks or n % blocks:
        sys.exit("--ops must be a multiple of --blocks (%d)" % blocks)
    agent, gw, lean = Resp(a.socket), Gateway(a.etcd), LeanGateway(a.etcd)
    relay_path = a.socket + ".relay"
    relay_process = subprocess.Popen([sys.executable, __file__, "--serve-relay", relay_path, "--etcd", a.etcd, "--prefix", a.prefix,
                                      "--socket", a.socket], stdout=subprocess.PIPE)
    if relay_process.stdout.readline().strip() != b"ready":
        sys.exit("the relay did not start")
    relay = Resp(relay_path)
    ekey = lambda i: (a.prefix + NS + "/k%d" % i).encode()
    value = {"agent": b"agent-value-0001", "etcd": b"etcd-value-00001"}   # 16 bytes each
    current, version = {}, {}   # what each key holds, and its mod_revision (ActorKV's version)

    # One op of each kind on each side, as closures over key i.
    def agent_put(i):
        def op():
            r = agent.call("PUT", NS, "k%d" % i, value["agent"])
            if r != "OK":
                raise RuntimeError("PUT: %r" % r)
            current[i] = value["agent"]
        return op

    def etcd_put(i):
        def op():
            gw.post("/v3/kv/put", {"key": b64(ekey(i)), "value": b64(value["etcd"])})
            current[i] = value["etcd"]
        return op

    def agent_get(i):
        def op():
            r = agent.call("GET", NS, "k%d" % i)
            if r != current[i]:
                raise RuntimeError("GET k%d: %r, expected %r" % (i, r, current[i]))
        return op

    def etcd_get(i):
        def op():
            kvs = gw.post("/v3/kv/range", {"key": b64(ekey(i))}).get("kvs") or []
            if not kvs or base64.b64decode(kvs[0]["value"]) != current[i]:
                raise RuntimeError("range k%d: %r, expected %r" % (i, kvs, current[i]))
        return op

    def lean_put(i):
        def op():
            lean.post("/v3/kv/put", b'{"key":"%s","value":"%s"}' % (base64.b64encode(ekey(i)), base64.b64encode(value["etcd"])))
            current[i] = value["etcd"]
        return op

    def lean_get(i):
        def op():
            body = lean.post("/v3/kv/range", b'{"key":"%s"}' % base64.b64encode(ekey(i)))
            if b'"value":"%s"' % base64.b64encode(current[i]) not in body:
                raise RuntimeError("range k%d: %r, expected %r" % (i, body[:300], current[i]))
        return op

    def relay_get(i):
        def op():
            r = relay.call("GET", NS, "k%d" % i)
            if r != current[i]:
                raise RuntimeError("relay GET k%d: %r, expected %r" % (i, r, current[i]))
        return op

    def lean_txn(i):
        def op():
            k = base64.b64encode(ekey(i))
            body = lean.post("/v3/kv/txn", b'{"compare":[{"key":"%s","target":"MOD","result":"EQUAL","mod_revision":"%d"}],'
                             b'"success":[{"request_put":{"key":"%s","value":"%s"}}]}' % (k, version[i], k, base64.b64encode(value["etcd"])))
            if b'"succeeded":true' not in body:
                raise RuntimeError("txn on mod_revision %d did not succeed: %r" % (version[i], body[:300]))
            version[i] = int(body.split(b'"revision":"', 1)[1].split(b'"', 1)[0])
            current[i] = value["etcd"]
        return op

    def agent_txn(i):
        def op():
            r = agent.call("PUT", NS, "k%d" % i, value["agent"], "IFVERSION", version[i])
            if not isinstance(r, int) or r <= version[i]:
                raise RuntimeError("PUT IFVERSION %d: %r (the guard should hold)" % (version[i], r))
            version[i], current[i] = r, value["agent"]
        return op

    def etcd_txn(i):
        def op():
            k = b64(ekey(i))
            r = gw.post("/v3/kv/txn", {
                "compare": [{"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": str(version[i])}],
                "success": [{"request_put": {"key": k, "value": b64(value["etcd"])}}]})
            if r.get("succeeded") is not True:
                raise RuntimeError("txn on mod_revision %d did not succeed: %r" % (version[i], r))
            version[i], current[i] = int(r["header"]["revision"]), value["etcd"]
        return op

    # Warm-up (untimed): connections, the agent's pool to etcd, both code paths.
    for i in range(n, n + 50):
        agent_put(i)(); etcd_put(i)(); agent_get(i)(); etcd_get(i)(); lean_put(i)(); lean_get(i)(); relay_get(i)()

    kinds = [("PUT", {"agent": agent_put, "etcd": etcd_put, "lean": lean_put}),
             ("GET", {"agent": agent_get, "etcd": etcd_get, "lean": lean_get, "relay": relay_get}),
             ("guarded txn", {"agent": agent_txn, "etcd": etcd_txn, "lean": lean_txn})]
    size = n // blocks
    results = []
    gc.disable()
    for name, makers in kinds:
        if name == "guarded txn":   # the versions the guards compare with (untimed)
            end = a.prefix + NS + "/k" + chr(ord("9") + 1)
            r = gw.post("/v3/kv/range", {"key": b64((a.prefix + NS + "/k").encode()), "range_end": b64(end.encode())})
            for kv in r.get("kvs") or []:
                version[int(base64.b64decode(kv["key"]).decode().rsplit("/k", 1)[1])] = int(kv["mod_revision"])
        lat = {side: [] for side in makers}
        wall, cpu = {side: 0 for side in makers}, {side: 0 for side in makers}
        for b in range(blocks):
            keys = range(b * size, (b + 1) * size)
            sides = list(makers.items())
            sides = sides[b % len(sides):] + sides[:b % len(sides)]   # each side first in turn
            for side, make in sides:
                l, w, c = timed([make(i) for i in keys])
                lat[side] += l
                wall[side] += w
                cpu[side] += c
            gc.collect()
        results.append((name, {s: summary(lat[s], wall[s], cpu[s]) for s in lat}))
    gc.enable()

    relay_process.kill()
    print("| op (%d sequential round trips per side, %d alternating blocks) | agent ops/s | agent p50 / p99 (µs) "
          "| etcd gateway ops/s | etcd p50 / p99 (µs) | agent overhead on p50 | on mean "
          "| client's CPU per op, agent / etcd (µs) | overhead on mean less the client's CPU |" % (n, blocks))
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, s in results:
        ag, et = s["agent"], s["etcd"]
        print("| %s | %.0f | %.0f / %.0f | %.0f | %.0f / %.0f | %+.1f%% | %+.1f%% | %.0f / %.0f | %+.1f%% |" % (
            name, ag["ops"], ag["p50"], ag["p99"], et["ops"], et["p50"], et["p99"],
            (ag["p50"] / et["p50"] - 1) * 100, (ag["mean"] / et["mean"] - 1) * 100, ag["cpu"], et["cpu"],
            ((ag["mean"] - ag["cpu"]) / (et["mean"] - et["cpu"]) - 1) * 100))
    print()
    print("| op, against the least a client spends (a raw socket, no json) | lean etcd client p50 / mean (µs) | agent p50 / mean "
          "| agent overhead on p50 / mean | a do-nothing relay p50 / mean | relay overhead on p50 / mean |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, s in results:
        ag, le, re_ = s["agent"], s["lean"], s.get("relay")
        relay = ("%.0f / %.0f | %+.1f%% / %+.1f%%" % (re_["p50"], re_["mean"], (re_["p50"] / le["p50"] - 1) * 100,
                                                     (re_["mean"] / le["mean"] - 1) * 100)) if re_ else "|"
        print("| %s | %.0f / %.0f | %.0f / %.0f | %+.1f%% / %+.1f%% | %s |" % (
            name, le["p50"], le["mean"], ag["p50"], ag["mean"], (ag["p50"] / le["p50"] - 1) * 100,
            (ag["mean"] / le["mean"] - 1) * 100, relay))


def summary(lat_ns, wall_ns, cpu_ns):
    us = sorted(x / 1000 for x in lat_ns)
    return {"ops": len(us) / (wall_ns / 1e9), "p50": statistics.median(us), "cpu": cpu_ns / 1000 / len(us),
            "p99": us[min(len(us) - 1, int(len(us) * 0.99))], "mean": statistics.fmean(us)}


if __name__ == "__main__":
    main()
