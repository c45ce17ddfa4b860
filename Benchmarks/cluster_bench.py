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
Every reply is checked (values read back, guarded writes succeeded); any error raises. Prints a
Markdown table: ops/s, p50 and p99 latency (µs), the agent's overhead on p50 and on the mean, this
client's own CPU time per op on each side (http.client and json cost more than RESP), and the
overhead on the mean once that CPU time is taken out of both sides (the time spent outside this
process: agent plus etcd against etcd alone).
"""
import argparse, base64, gc, http.client, json, socket, statistics, sys, time
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
    a = p.parse_args()
    n = 200 if a.quick else a.ops
    blocks = a.blocks
    if n < blocks or n % blocks:
        sys.exit("--ops must be a multiple of --blocks (%d)" % blocks)
    agent, gw = Resp(a.socket), Gateway(a.etcd)
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
        agent_put(i)(); etcd_put(i)(); agent_get(i)(); etcd_get(i)()

    kinds = [("PUT", agent_put, etcd_put), ("GET", agent_get, etcd_get), ("guarded txn", agent_txn, etcd_txn)]
    size = n // blocks
    results = []
    gc.disable()
    for name, make_agent, make_etcd in kinds:
        if make_agent is agent_txn:   # the versions the guards compare with (untimed)
            end = a.prefix + NS + "/k" + chr(ord("9") + 1)
            r = gw.post("/v3/kv/range", {"key": b64((a.prefix + NS + "/k").encode()), "range_end": b64(end.encode())})
            for kv in r.get("kvs") or []:
                version[int(base64.b64decode(kv["key"]).decode().rsplit("/k", 1)[1])] = int(kv["mod_revision"])
        lat = {"agent": [], "etcd": []}
        wall, cpu = {"agent": 0, "etcd": 0}, {"agent": 0, "etcd": 0}
        for b in range(blocks):
            keys = range(b * size, (b + 1) * size)
            sides = [("agent", make_agent), ("etcd", make_etcd)]
            for side, make in (sides if b % 2 == 0 else sides[::-1]):
                l, w, c = timed([make(i) for i in keys])
                lat[side] += l
                wall[side] += w
                cpu[side] += c
            gc.collect()
        results.append((name, {s: summary(lat[s], wall[s], cpu[s]) for s in lat}))
    gc.enable()

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


def summary(lat_ns, wall_ns, cpu_ns):
    us = sorted(x / 1000 for x in lat_ns)
    return {"ops": len(us) / (wall_ns / 1e9), "p50": statistics.median(us), "cpu": cpu_ns / 1000 / len(us),
            "p99": us[min(len(us) - 1, int(len(us) * 0.99))], "mean": statistics.fmean(us)}


if __name__ == "__main__":
    main()
