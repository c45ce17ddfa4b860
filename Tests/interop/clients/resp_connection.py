"""A blocking RESP connection over a Unix socket for the test scripts (differential.py, the
cluster suite's changes_equivalence.py): requests out as RESP2 multibulk, replies in as typed
trees that keep RESP2 and RESP3 apart; and their TAP-like `ok`/`not ok` lines. Standard library
only."""

import socket

FAILED = 0


def ok(name):
    print(f"ok - {name}")


def not_ok(name, *details):
    """A failed check, with its details as `#` lines."""
    global FAILED
    FAILED += 1
    print(f"not ok - {name}")
    for line in details:
        for part in str(line).splitlines():
            print(f"#   {part}")


def failed():
    """How many checks failed."""
    return FAILED


def encode(args):
    """`args` (str or bytes) as one RESP multibulk request."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Connection:
    """One blocking connection that sends commands and decodes whole replies."""

    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""

    def close(self):
        self.sock.close()

    def send(self, commands):
        """Sends `commands` in one write, reading nothing."""
        self.sock.sendall(b"".join(encode(c) for c in commands))

    def call(self, args):
        self.send([args])
        return self.reply()

    def pipeline(self, commands):
        """Sends `commands` in one write, then reads their replies: the server takes them in
        one turn, so its merged paths run (data commands of a namespace in one run, a whole
        MULTI…EXEC as one batch)."""
        self.send(commands)
        return [self.reply() for _ in commands]

    def _line(self):
        while b"\r\n" not in self.buffer:
            self._fill()
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _exactly(self, n):
        while len(self.buffer) < n + 2:
            self._fill()
        data, self.buffer = self.buffer[:n], self.buffer[n + 2:]
        return data

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def reply(self):
        """A reply as a tuple (type, payload): types keep RESP2 and RESP3 apart."""
        return self._typed()

    def _typed(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return ("simple", rest)
        if kind == b"-":
            return ("error", rest)
        if kind == b":":
            return ("integer", int(rest))
        if kind in (b"$", b"="):
            n = int(rest)
            return ("bulk", None) if n < 0 else ("bulk" if kind == b"$" else "verbatim", self._exactly(n))
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            name = {b"*": "array", b"~": "set", b">": "push"}[kind]
            return (name, None) if n < 0 else (name, [self._typed() for _ in range(n)])
        if kind == b"%":
            return ("map", [(self._typed(), self._typed()) for _ in range(int(rest))])
        if kind == b"_":
            return ("null", None)
        if kind == b",":
            return ("double", rest)
        if kind == b"#":
            return ("boolean", rest)
        if kind == b"(":
            return ("bignumber", rest)
        raise ValueError(f"not a RESP reply: {line!r}")


def plain(reply):
    """A typed reply as plain values: bytes, int, None, lists; an error as ("error", text)."""
    kind, payload = reply
    if kind == "error":
        return reply
    if kind in ("array", "set", "push") and payload is not None:
        return [plain(r) for r in payload]
    if kind == "map":
        return [x for k, v in payload for x in (plain(k), plain(v))]
    return payload
