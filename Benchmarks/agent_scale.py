#!/usr/bin/env python3
"""Benchmarks/agent_scale.py: what an etcd agent's commands cost on large and many namespaces,
for BENCHMARKS.md (round 77). Talks to a running agent (actorkvd --etcd ...) on SOCKET; asserts
nothing: it is a measuring tool.

  agent_scale.py SOCKET fill NS KEYS        HSET NS k0000000 v ... until NS holds KEYS fields
  agent_scale.py SOCKET namespaces COUNT    COUNT namespaces ns000..., each a field and (a field
                                            put and deleted) its marker
  agent_scale.py SOCKET listing             DBSIZE five times: milliseconds each
  agent_scale.py SOCKET watch NS            WATCH NS, MULTI, HSET NS x i, EXEC, five times:
                                            milliseconds of WATCH and of EXEC
  agent_scale.py SOCKET snapshot NS BYTES   CHANGES NS SNAPSHOT: seconds until BYTES bytes of
                                            reply arrived (run `wc` on one first to know them)
  agent_scale.py ENDPOINT puttxn            straight to etcd's gateway (host:port): requests/s
                                            of a put, a txn of it, and a txn of it and a marker,
                                            by 1 and by 50 clients
"""
import base64, http.client, json, random, socket, sys, threading, time


def encode(*words):
    out = b"*%d\r\n" % len(words)
    for word in words:
        data = word if isinstance(word, bytes) else str(word).encode()
        out += b"$%d\r\n%s\r\n" % (len(data), data)
    return out


class Agent:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, *words):
        self.sock.sendall(encode(*words))

    def line(self):
        while b"\r\n" not in self.buffer:
            self.buffer += self.sock.recv(1 << 20)
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def call(self, *words):
        """One command whose reply is one line (a status, an integer, an error, *-1)."""
        self.send(*words)
        return self.line()

    def pipeline(self, commands):
        self.sock.sendall(b"".join(encode(*c) for c in commands))
        return [self.line() for _ in commands]


def timed(function):
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def fill(agent, ns, keys):
    have = int(agent.call("HLEN", ns)[1:])
    while have < keys:
        batch = range(have, min(keys, have + 1000))
        agent.pipeline([("HSET", ns, "k%07d" % i, "v") for i in batch])
        have = batch[-1] + 1
    print(ns, "holds", int(agent.call("HLEN", ns)[1:]), "fields")


def namespaces(agent, count):
    for i in range(count):
        name = "ns%03d" % i
        agent.pipeline([("HSET", name, "f", "1"), ("HSET", name, "g", "1"), ("HDEL", name, "g")])
    print(count, "namespaces")


def listing(agent):
    print("DBSIZE ms:", " ".join("%.1f" % timed(lambda: agent.call("DBSIZE")) for _ in range(5)))


def watch(agent, ns):
    watches, execs = [], []
    for i in range(5):
        watches.append(timed(lambda: agent.call("WATCH", ns)))
        agent.call("MULTI")
        agent.call("HSET", ns, "x", str(i))
        start = time.perf_counter()
        agent.send("EXEC")
        agent.line()  # *1
        agent.line()  # :0 or :1
        execs.append((time.perf_counter() - start) * 1000)
    print("WATCH ms:", " ".join("%.1f" % t for t in watches), "| EXEC ms:", " ".join("%.1f" % t for t in execs))


def snapshot(agent, ns, total):
    start = time.perf_counter()
    agent.send("CHANGES", ns, "SNAPSHOT")
    received = len(agent.buffer)
    while received < total:
        received += len(agent.sock.recv(1 << 20))
    print("SNAPSHOT: %.2f s for %d bytes" % (time.perf_counter() - start, received))


def puttxn(endpoint):
    host, port = endpoint.split(":")

    def b64(text):
        return base64.b64encode(text.encode()).decode()

    def body(kind):
        put = {"key": b64("bench/k%d" % random.randrange(100000)), "value": b64("v")}
        if kind == "put":
            return "/v3/kv/put", put
        ops = [{"request_put": put}]
        if kind == "txn of put and a shared marker":
            ops.append({"request_put": {"key": b64("bench0"), "value": ""}})
        return "/v3/kv/txn", {"success": ops}

    def client(kind, count):
        connection = http.client.HTTPConnection(host, int(port))
        for _ in range(count):
            path, payload = body(kind)
            connection.request("POST", path, json.dumps(payload))
            connection.getresponse().read()

    for clients, count in ((1, 300), (50, 100)):
        for kind in ("put", "txn of put", "txn of put and a shared marker"):
            threads = [threading.Thread(target=client, args=(kind, count)) for _ in range(clients)]
            start = time.time()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            print("%d clients, %s: %.0f/s" % (clients, kind, clients * count / (time.time() - start)))


def main(args):
    if len(args) >= 2 and args[1] == "puttxn":
        return puttxn(args[0])
    if len(args) < 2:
        sys.exit(__doc__)
    agent = Agent(args[0])
    command, rest = args[1], args[2:]
    if command == "fill":
        fill(agent, rest[0], int(rest[1]))
    elif command == "namespaces":
        namespaces(agent, int(rest[0]))
    elif command == "listing":
        listing(agent)
    elif command == "watch":
        watch(agent, rest[0])
    elif command == "snapshot":
        snapshot(agent, rest[0], int(rest[1]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
