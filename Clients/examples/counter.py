#!/usr/bin/env python3
"""Counting from many processes at once with ActorKV, without losing a single increment.

It starts N worker processes, each with its own connection, that all add 1 to the same keys
M times at the same moment, in two ways:

* ``visits``: with INCR (``kv.incr``), which the server applies atomically;
* ``doc``: with a read-modify-write of a JSON document (``kv.update``): read the value and
  its version, change it, write it back only if nobody wrote it in between, else retry.

At the end both hold N x M. (A plain GET then PUT would lose increments: two processes read
the same value and both write value + 1.)

    python3 counter.py --socket /tmp/actorkv.sock [--processes 8] [--count 50] [--namespace demo]

The client module is found in ../python (next to this file) or on PYTHONPATH.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from actorkv import ActorKVError, Client  # noqa: E402


def add_one(old):
    """The update: the JSON document with its count one higher (a new one if absent)."""
    doc = json.loads(old) if old is not None else {"count": 0}
    doc["count"] += 1
    return json.dumps(doc, sort_keys=True)


def work(args):
    """One worker: waits for the go line on stdin, then counts."""
    with Client(args.socket) as kv:
        kv.ping()
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(args.count):
            kv.incr(args.namespace, "visits")
            kv.update(args.namespace, "doc", add_one)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", default=os.environ.get("ACTORKV_SOCKET") or "./actorkv.sock",
                        help="the server's Unix socket (default $ACTORKV_SOCKET, else ./actorkv.sock, as the clients)")
    parser.add_argument("--namespace", default="demo", help="namespace to write (default demo)")
    parser.add_argument("--processes", type=int, default=8, help="worker processes (default 8)")
    parser.add_argument("--count", type=int, default=50,
                        help="increments per worker and key (default 50)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    try:
        if args.worker:
            return work(args)
        with Client(args.socket) as kv:
            kv.delete(args.namespace, "visits", "doc")
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--socket", args.socket,
                   "--namespace", args.namespace, "--count", str(args.count)]
        workers = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                   for _ in range(args.processes)]
        for worker in workers:  # all connected before any starts: they really race
            worker.stdout.readline()
        for worker in workers:
            worker.stdin.write(b"go\n")
            worker.stdin.flush()
        failed = sum(1 for worker in workers if worker.wait() != 0)
        for worker in workers:
            worker.stdin.close()
            worker.stdout.close()
        with Client(args.socket) as kv:
            visits = int(kv.get(args.namespace, "visits") or 0)
            doc = json.loads(kv.get(args.namespace, "doc") or b'{"count": 0}')
    except ActorKVError as error:
        print("counter: %s" % error, file=sys.stderr)
        return 1
    expected = args.processes * args.count
    print("counter: %d processes x %d: visits=%d doc.count=%d (expected %d each)"
          % (args.processes, args.count, visits, doc["count"], expected))
    return 0 if failed == 0 and visits == expected and doc["count"] == expected else 1


if __name__ == "__main__":
    sys.exit(main())
