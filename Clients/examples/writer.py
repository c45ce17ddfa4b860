#!/usr/bin/env python3
"""Writer half of the ActorKV sharing example: a Python process publishes its progress.

It counts from 1 to N and, at each step, stores the counter and a status line in one
namespace with a single BATCH, so that a reader never sees a counter and a status from two
different steps. When it is done the status is "done N".

    python3 writer.py --socket /tmp/actorkv.sock --count 100 [--namespace demo] [--delay 0.05]

Any other process can read the same state while it runs, e.g. the shell reader:

    ./reader.sh --socket /tmp/actorkv.sock

The client module is found in ../python (next to this file) or on PYTHONPATH.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from actorkv import ActorKVError, Client  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", default=os.environ.get("ACTORKV_SOCKET") or "./actorkv.sock",
                        help="the server's Unix socket (default $ACTORKV_SOCKET, else ./actorkv.sock, as the clients)")
    parser.add_argument("--namespace", default="demo", help="namespace to write (default demo)")
    parser.add_argument("--count", type=int, default=10, help="how many steps (default 10)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between steps")
    args = parser.parse_args(argv)

    try:
        with Client(args.socket) as kv:
            kv.put(args.namespace, "status", "starting")
            for n in range(1, args.count + 1):
                kv.batch(args.namespace, [
                    ("put", "counter", str(n)),
                    ("put", "status", "running %d/%d" % (n, args.count)),
                ])
                if args.delay:
                    time.sleep(args.delay)
            kv.put(args.namespace, "status", "done %d" % args.count)
    except ActorKVError as error:
        print("writer: %s" % error, file=sys.stderr)
        return 1
    print("writer: wrote %d steps to namespace %s" % (args.count, args.namespace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
