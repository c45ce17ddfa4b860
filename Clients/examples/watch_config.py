#!/usr/bin/env python3
"""Watching a namespace's changes with ActorKV: a live view of a configuration.

By default it keeps a local copy of the namespace (``kv.mirror``): it prints every key once it
holds the current state, then each change as it is written, with its sequence number::

    python3 watch_config.py --socket /tmp/kv/s --namespace config [--prefix feature.]

    synced at 12: 3 keys
      feature.dark = 'on'
      ...
    13  feature.beta = 'off'
    14  feature.dark deleted

With ``--from SEQ`` it prints only the changes after SEQ (``kv.changes(..., from_seq=SEQ)``):
the way to resume where an earlier run stopped (its last printed number), with nothing missed
and nothing twice -- also after the server restarted.

The feed reconnects by itself when the server restarts or is killed, and resumes after the
last change it delivered. ``--exit-after N`` stops after N changes (for scripts and tests).
The client module is found in ../python (next to this file) or on PYTHONPATH.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from actorkv import ActorKVError, Change, Client, Snapshot, Synced  # noqa: E402


def show(key, value):
    key = key.decode("utf-8", "replace")
    if value is None:
        return "%s deleted" % key
    return "%s = %r" % (key, value.decode("utf-8", "replace"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", default=os.environ.get("ACTORKV_SOCKET") or "./actorkv.sock",
                        help="the server's Unix socket (default $ACTORKV_SOCKET, else ./actorkv.sock, as the clients)")
    parser.add_argument("--namespace", default="config", help="the namespace to watch")
    parser.add_argument("--prefix", default=None, help="only keys that start with this")
    parser.add_argument("--from", dest="from_seq", type=int, default=None, metavar="SEQ",
                        help="print the changes after SEQ instead of mirroring")
    parser.add_argument("--exit-after", type=int, default=None, metavar="N",
                        help="stop after N changes")
    args = parser.parse_args(argv)
    changes = 0
    try:
        with Client(args.socket) as kv:
            if args.from_seq is None:
                follower = kv.mirror(args.namespace, prefix=args.prefix)
                print("synced at %d: %d keys" % (follower.seq, len(follower.data)))
                for key in sorted(follower.data):
                    print("  " + show(key, follower.data[key]))
            else:
                follower = kv.changes(args.namespace, prefix=args.prefix, from_seq=args.from_seq)
            sys.stdout.flush()
            with follower:
                while args.exit_after is None or changes < args.exit_after:
                    event = next(follower)
                    if isinstance(event, Change):
                        changes += 1
                        for key, value in event.items:
                            print("%d  %s" % (event.seq, show(key, value)))
                    elif isinstance(event, Snapshot):  # a mirror that had to start over
                        print("new snapshot at %d: %d keys" % (event.seq, len(event.items)))
                    elif isinstance(event, Synced) and args.from_seq is not None:
                        print("synced at %d" % event.seq)
                    sys.stdout.flush()
    except ActorKVError as error:
        print("watch_config: %s" % error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
