"""Many clients at once, every reply checked against an exact model.

Each worker process owns 30 keys of namespace `model` and sends random pipelines (1 to 120
requests: PUT, GET, DEL of two keys, INCR of one shared counter, BATCH PUT+DEL, GETV, EXISTS),
written in random fragments (a byte at a time, 7, 100, 4096 bytes, or whole). Most pipelines
are read to the end; some are half-closed first (every reply, then the end of the stream, must
arrive); some are abandoned (the socket closed without reading: those writes may or may not
happen, so the worker reads its keys back until two reads 0.1 s apart agree). Replies are compared with what the
worker's own model says, in order; at the end each worker's keys must hold what it was last
acknowledged, and the shared counter must equal the acknowledged INCRs plus at most the
abandoned ones.

usage: concurrent_model.py SOCKET [--seconds S] [--workers W] [--seed N]
Prints `ok - ...` / `not ok - ...` lines; exits 1 if any check failed.
"""
import argparse
import multiprocessing
import os
import random
import socket
import sys
import time

# The Python client's request encoder and reply parser (pure: no socket of their own).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "Clients", "python"))
from actorkv import NOT_READY, ReplyParser, encode_command as encode  # noqa: E402

NAMESPACE = "model"
KEYS = 30


class Reader:
    """Replies from a socket, through the client's ``ReplyParser``: 'OK' for ``+OK``, int,
    bytes, None (``$-1``), list; an error reply is a ``ServerError`` (compared, not raised)."""

    def __init__(self, sock):
        self.sock, self.parser = sock, ReplyParser()

    def reply(self):
        while True:
            reply = self.parser.gets()
            if reply is not NOT_READY:
                return reply
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the server closed the connection before the reply")
            self.parser.feed(data)


class Worker:
    def __init__(self, path, index, seed):
        self.path, self.index = path, index
        self.rng = random.Random(seed * 1000 + index)
        self.model = {}
        self.counts = dict(ops=0, pipelines=0, abandoned=0, half_closed=0, incr_acked=0, incr_unknown=0)
        self.connect()

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(self.path)
        self.reader = Reader(self.sock)

    def key(self, i):
        return b"w%d-k%d" % (self.index, i)

    def random_pipeline(self):
        """Requests, the reply each must get, and the model once all are acknowledged."""
        rng, after = self.rng, dict(self.model)
        requests, expected = [], []
        for _ in range(rng.choice([1, 1, 1, 2, 3, 8, 16, 40, 120])):
            k, op = self.key(rng.randrange(KEYS)), rng.random()
            if op < 0.3:
                v = b"v%d" % rng.randrange(10**9) * rng.choice([1, 1, 5, 200])
                requests.append(encode("PUT", NAMESPACE, k, v)); expected.append("OK"); after[k] = v
            elif op < 0.55:
                requests.append(encode("GET", NAMESPACE, k)); expected.append(after.get(k))
            elif op < 0.62:
                k2 = self.key(rng.randrange(KEYS))
                removed = (k in after) + (k2 != k and k2 in after)
                requests.append(encode("DEL", NAMESPACE, k, k2)); expected.append(removed)
                after.pop(k, None); after.pop(k2, None)
            elif op < 0.72:
                requests.append(encode("INCR", NAMESPACE, "counter")); expected.append("INCR")
            elif op < 0.8:
                v, k2 = b"b%d" % rng.randrange(10**6), self.key(rng.randrange(KEYS))
                requests.append(encode("BATCH", NAMESPACE, "PUT", k, v, "DEL", k2))
                expected.append(["OK", 1 if k2 == k or k2 in after else 0])
                after[k] = v; after.pop(k2, None)
            elif op < 0.9:
                requests.append(encode("GETV", NAMESPACE, k)); expected.append(("GETV", after.get(k)))
            else:
                requests.append(encode("EXISTS", NAMESPACE, k)); expected.append(1 if k in after else 0)
        return b"".join(requests), expected, after

    def send_in_fragments(self, data):
        pos = 0
        while pos < len(data):
            step = self.rng.choice([len(data), len(data), 1, 7, 100, 4096])
            self.sock.sendall(data[pos:pos + step])
            pos += step
            if self.rng.random() < 0.05:
                time.sleep(0.0005)

    def check(self, got, want):
        if want == "INCR":
            assert isinstance(got, int), "INCR replied %r" % (got,)
            self.counts["incr_acked"] += 1
        elif isinstance(want, tuple) and want[0] == "GETV":
            if want[1] is None:
                assert got is None, "GETV of an absent key replied %r" % (got,)
            else:
                assert isinstance(got, list) and got[0] == want[1] and got[1] > 0, \
                    "GETV replied %r, the model holds %r" % (got, want[1])
        else:
            assert got == want, "replied %r where the model says %r" % (got, want)

    def read_keys(self):
        self.sock.sendall(b"".join(encode("GET", NAMESPACE, self.key(i)) for i in range(KEYS)))
        return {self.key(i): v for i, v in ((i, self.reader.reply()) for i in range(KEYS)) if v is not None}

    def read_back(self):
        """The model from the server, after an abandoned pipeline: the server may still be
        running what it read from the closed socket, so read until two reads 0.1 s apart agree."""
        previous = self.read_keys()
        for _ in range(100):
            time.sleep(0.1)
            current = self.read_keys()
            if current == previous:
                break
            previous = current
        self.model = previous

    def run(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            data, expected, after = self.random_pipeline()
            self.send_in_fragments(data)
            mode = self.rng.random()
            if mode < 0.03:
                self.sock.close()
                self.counts["abandoned"] += 1
                self.counts["incr_unknown"] += expected.count("INCR")
                self.connect()
                self.read_back()
                continue
            half = mode < 0.08
            if half:
                self.sock.shutdown(socket.SHUT_WR)
            for want in expected:
                self.check(self.reader.reply(), want)
                self.counts["ops"] += 1
            self.model = after
            self.counts["pipelines"] += 1
            if half:
                rest = self.sock.recv(16)
                assert rest == b"", "after the last reply of a half-closed connection: %r" % rest
                self.counts["half_closed"] += 1
                self.sock.close()
                self.connect()
        for i in range(KEYS):
            k = self.key(i)
            self.sock.sendall(encode("GET", NAMESPACE, k))
            value = self.reader.reply()
            assert value == self.model.get(k), "at the end %r holds %r, acknowledged %r" % (k, value, self.model.get(k))
        self.sock.close()


def work(args):
    path, index, seed, seconds = args
    worker = Worker(path, index, seed)
    try:
        worker.run(seconds)
        return None, worker.counts
    except Exception as error:  # a wrong reply, a closed or reset connection, a framing error
        return "worker %d: %s: %s" % (index, type(error).__name__, error), worker.counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("socket")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    admin = socket.socket(socket.AF_UNIX); admin.connect(args.socket)
    admin.sendall(encode("DEL", NAMESPACE, "counter")); Reader(admin).reply()
    with multiprocessing.Pool(args.workers) as pool:
        results = pool.map(work, [(args.socket, i, args.seed, args.seconds) for i in range(args.workers)])
    totals = {name: sum(c[name] for _, c in results) for name in results[0][1]}
    failures = [f for f, _ in results if f]
    label = "%d clients for %g s (seed %d): %d replies in %d pipelines, %d half-closed, %d abandoned" % (
        args.workers, args.seconds, args.seed, totals["ops"], totals["pipelines"], totals["half_closed"], totals["abandoned"])
    failed = False
    if failures:
        failed = True
        print("not ok - %s: every reply as the model says, every key as last acknowledged" % label)
        for f in failures:
            print("#   %s" % f)
    else:
        print("ok - %s: every reply as the model says, every key as last acknowledged" % label)
    admin.sendall(encode("GET", NAMESPACE, "counter"))
    reply = Reader(admin).reply()
    counter = int(reply) if isinstance(reply, bytes) and reply.isdigit() else 0 if reply is None else None
    acked, unknown = totals["incr_acked"], totals["incr_unknown"]
    if counter is None:
        failed = True
        print("not ok - the shared counter reads as a count: GET replied %r" % (reply,))
    elif acked <= counter <= acked + unknown:
        print("ok - the shared counter is %d: %d acknowledged INCRs, and %d of %d abandoned ones" % (counter, acked, counter - acked, unknown))
    else:
        failed = True
        print("not ok - the shared counter is %d, not %d acknowledged INCRs plus at most %d abandoned ones" % (counter, acked, unknown))
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
