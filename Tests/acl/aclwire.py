"""Helpers for the namespace-permission wire tests (Tests/acl), standard library only.

- RESP: ``encode`` a command as a multibulk request; ``parse`` one reply (RESP2, and the RESP3
  types for robustness) from a buffer: ``Simple`` and ``Error`` strings, ints, ``bytes`` for bulk
  strings, ``None`` for nulls, lists for arrays.
- ``Server``: a real actorkvd, run as this process's uid (root in CI), in a temporary directory
  of mode 0755 with ``--socket-mode 666``, so that other uids reach its socket.
- ``Conn``: a client in this process (the server's own uid).
- ``Peer``: a client in a forked child that drops to another uid, gid and supplementary groups
  (setgroups, setresgid, setresuid) BEFORE it connects, so that the kernel reports that identity
  to the server (SO_PEERCRED, SO_PEERGROUPS). The parent drives it over a pipe with JSON lines
  (send these commands in one write; read the next reply) and gets the replies back the same way.
  A Peer may instead run a function of its own (``main``), as the writers under load do.

The binary is ``$ACTORKVD`` or ``<repo root>/.build/debug/actorkvd``.
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import traceback
import unittest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACTORKVD = os.environ.get("ACTORKVD") or os.path.join(REPO_ROOT, ".build", "debug", "actorkvd")
#: Upper bound for any wait (a server starting, a reply, a reload); generous, never asserted on.
PATIENCE = 60.0


def require_root_and_server():
    """Skips (or, with ACTORKV_REQUIRE_SERVER=1, fails) without an actorkvd binary or without
    root, which the tests need to run clients under other uids."""
    problem = None
    if not (os.path.isfile(ACTORKVD) and os.access(ACTORKVD, os.X_OK)):
        problem = "actorkvd not found at %s (build it, or set ACTORKVD)" % ACTORKVD
    elif os.geteuid() != 0:
        problem = "these tests run clients under other uids: they must run as root"
    if problem is None:
        return
    if os.environ.get("ACTORKV_REQUIRE_SERVER") == "1":
        raise RuntimeError(problem)
    raise unittest.SkipTest(problem)


# ============================================================================================
# RESP


class Simple(str):
    """A simple-string reply (``+OK``)."""

    def __repr__(self):
        return "+" + str.__str__(self)


class Error(str):
    """An error reply, without its ``-``: ``NOPERM no write permission on …``."""

    @property
    def code(self):
        return self.split(" ", 1)[0]

    def __repr__(self):
        return "-" + str.__str__(self)


class ProtocolError(Exception):
    pass


def encode(args):
    """One command as a RESP multibulk request; arguments are str (UTF-8), bytes or int."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, int):
            arg = str(arg)
        if isinstance(arg, str):
            arg = arg.encode("utf-8")
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class _Incomplete(Exception):
    pass


def parse(buf, pos=0):
    """Parses one reply from ``buf`` at ``pos``; returns (reply, next position). Raises
    ``_Incomplete`` if the buffer ends first (nothing is consumed: parse again with more)."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete()
    kind, line, pos = buf[pos:pos + 1], bytes(buf[pos + 1:end]), end + 2
    if kind == b"+":
        return Simple(line.decode("utf-8", "replace")), pos
    if kind == b"-":
        return Error(line.decode("utf-8", "replace")), pos
    if kind == b":":
        return int(line), pos
    if kind in (b"$", b"="):
        n = int(line)
        if n < 0:
            return None, pos
        if len(buf) < pos + n + 2:
            raise _Incomplete()
        if buf[pos + n:pos + n + 2] != b"\r\n":
            raise ProtocolError("bulk string not followed by CRLF")
        return bytes(buf[pos:pos + n]), pos + n + 2
    if kind in (b"*", b">", b"~", b"%", b"|"):
        n = int(line)
        if n < 0:
            return None, pos
        if kind in (b"%", b"|"):
            n *= 2
        items = []
        for _ in range(n):
            item, pos = parse(buf, pos)
            items.append(item)
        return items, pos
    if kind == b"_":
        return None, pos
    if kind == b"#":
        return line == b"t", pos
    if kind == b",":
        return float(line), pos
    raise ProtocolError("unknown reply type %r" % bytes(kind))


class ReplyReader(object):
    """Reads replies from a socket. A timeout while a reply is incomplete loses nothing."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def read(self):
        """The next reply; EOFError when the server closed the connection first."""
        while True:
            if self.buf:
                try:
                    reply, pos = parse(self.buf)
                except _Incomplete:
                    pass
                else:
                    del self.buf[:pos]
                    return reply
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the server closed the connection")
            self.buf += data


def to_json(reply):
    """A reply as JSON (to pass from a child to the parent); ``from_json`` undoes it."""
    if isinstance(reply, Simple):
        return {"+": str(reply)}
    if isinstance(reply, Error):
        return {"-": str(reply)}
    if isinstance(reply, bool):
        return {"#": reply}
    if isinstance(reply, int):
        return {":": reply}
    if isinstance(reply, float):
        return {",": reply}
    if isinstance(reply, bytes):
        return {"$": reply.decode("latin-1")}
    if isinstance(reply, list):
        return [to_json(item) for item in reply]
    if reply is None:
        return None
    raise TypeError(repr(reply))


def from_json(obj):
    if obj is None:
        return None
    if isinstance(obj, list):
        return [from_json(item) for item in obj]
    (kind, value), = obj.items()
    if kind == "+":
        return Simple(value)
    if kind == "-":
        return Error(value)
    if kind == "$":
        return value.encode("latin-1")
    return value


def info_fields(text):
    """INFO's bulk string as {field: value}."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    fields = {}
    for line in text.split("\r\n"):
        if line and not line.startswith("#") and ":" in line:
            name, value = line.split(":", 1)
            fields[name] = value
    return fields


def info_namespaces(text):
    """The namespaces INFO has an ``ns_<name>:`` line for: {name: {field: value}}."""
    namespaces = {}
    for name, value in info_fields(text).items():
        if name.startswith("ns_"):
            namespaces[name[3:]] = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    return namespaces


def noperm(right, namespace, uid):
    """The exact error a command lacking `right` gets (protocol.md, "Namespace permissions")."""
    return "NOPERM no %s permission on namespace '%s' for uid %d" % (right, namespace, uid)


# ============================================================================================
# Descriptors a forked child must not keep: the parent's connections and its ends of other
# peers' pipes (a child holding them would keep a connection open after the parent closes it,
# or a peer waiting for its pipe's end of file).

_PARENT_FDS = set()


def deadline_after(seconds=PATIENCE):
    return time.monotonic() + seconds


# ============================================================================================
# The server


class Server(object):
    """A real actorkvd in a private temporary directory (mode 0755: other uids reach the
    socket, made with --socket-mode 666). With ``acl`` (the text of the rules file) it runs
    with ``--acl <dir>/acl.conf``."""

    def __init__(self, acl=None, flags=()):
        self.dir = tempfile.mkdtemp(prefix="akvacl.", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "s")
        self.data = os.path.join(self.dir, "data")
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        self.acl_path = os.path.join(self.dir, "acl.conf") if acl is not None else None
        self.flags = list(flags)
        self.process = None
        self._root = None
        if acl is not None:
            self.write_acl(acl)

    def command(self):
        command = [ACTORKVD, "--socket", self.socket, "--data-dir", self.data, "--socket-mode", "666"]
        if self.acl_path is not None:
            command += ["--acl", self.acl_path]
        return command + self.flags

    def write_acl(self, text):
        """Replaces the rules file atomically (a temporary file renamed over it)."""
        temporary = self.acl_path + ".tmp"
        with open(temporary, "w") as f:
            f.write(text)
        os.rename(temporary, self.acl_path)

    def start(self):
        """Starts the server and waits until it answers PING (as the server's own uid)."""
        with open(self.stderr_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = deadline_after()
        while True:
            if self.process.poll() is not None:
                raise AssertionError("actorkvd exited with %s while starting:\n%s" % (self.process.returncode, self.log()))
            try:
                conn = Conn(self.socket, timeout=5)
            except OSError:
                conn = None
            if conn is not None:
                try:
                    if conn.call("PING") == "PONG":
                        self._root = conn
                        return self
                except (OSError, EOFError):
                    pass
                conn.close()
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError("actorkvd did not answer PING:\n" + self.log())
            time.sleep(0.05)

    @property
    def root(self):
        """A connection of the server's own uid (this process), kept open."""
        return self._root

    def conn(self):
        """A new connection of the server's own uid."""
        return Conn(self.socket)

    def peer(self, uid, gid, groups=(), main=None):
        """A client under another identity (see ``Peer``)."""
        return Peer(self.socket, uid, gid, groups, main=main)

    def info(self):
        return self.root.call("INFO").decode("utf-8")

    def acl_reloads(self):
        return int(info_fields(self.info())["acl_reloads"])

    def wait_until(self, predicate, what):
        deadline = deadline_after()
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("waited %d s for %s; server log:\n%s" % (PATIENCE, what, self.log()))
            if self.process.poll() is not None:
                raise AssertionError("actorkvd exited (%s) while waiting for %s:\n%s" % (self.process.returncode, what, self.log()))
            time.sleep(0.01)

    def reload_by_signal(self):
        """SIGHUP, then waits until the reload is in force (INFO's acl_reloads goes up)."""
        before = self.acl_reloads()
        self.process.send_signal(signal.SIGHUP)
        self.wait_until(lambda: self.acl_reloads() > before, "the reload after SIGHUP")

    def wait_for_log(self, text, start=0):
        """Waits until the server's stderr holds `text` after offset `start`."""
        self.wait_until(lambda: text in self.log()[start:], "the log line %r" % text)

    def log(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        """SIGTERM; returns the exit status."""
        if self._root is not None:
            self._root.close()
            self._root = None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("actorkvd did not exit after SIGTERM:\n" + self.log())

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(PATIENCE)

    def cleanup(self):
        if self._root is not None:
            self._root.close()
            self._root = None
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


# ============================================================================================
# Clients


class Conn(object):
    """A connection of this process (in the tests, root: the server's own uid)."""

    def __init__(self, path, timeout=PATIENCE):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _PARENT_FDS.add(self.sock.fileno())
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError:
            self.close()
            raise
        self.reader = ReplyReader(self.sock)

    def call(self, *args):
        self.sock.sendall(encode(args))
        return self.reader.read()

    def pipeline(self, commands):
        """Sends the commands in one write; returns their replies."""
        self.sock.sendall(b"".join(encode(c) for c in commands))
        return [self.reader.read() for _ in commands]

    def read(self):
        return self.reader.read()

    def close(self):
        if self.sock is not None:
            _PARENT_FDS.discard(self.sock.fileno())
            self.sock.close()
            self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PeerFailed(AssertionError):
    pass


class _Lines(object):
    """JSON lines over a pipe: send to one descriptor, receive from another with a deadline."""

    def __init__(self, read_fd, write_fd):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.buf = b""

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.write_fd, data):]

    def ready(self):
        """Whether a line (or the end of the pipe) is waiting."""
        return b"\n" in self.buf or bool(select.select([self.read_fd], [], [], 0)[0])

    def recv(self, timeout=None):
        """The next object; None at the end of the pipe. Raises TimeoutError after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                    raise TimeoutError("no message within %s s" % timeout)
            data = os.read(self.read_fd, 1 << 16)
            if not data:
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line.decode("utf-8"))


class ChildConn(object):
    """The child's connection to the server (used by a Peer's own ``main``)."""

    def __init__(self, sock):
        self.sock = sock
        self.reader = ReplyReader(sock)

    def send(self, commands):
        self.sock.sendall(b"".join(encode(c) for c in commands))

    def read(self):
        return self.reader.read()

    def pipeline(self, commands):
        self.send(commands)
        return [self.read() for _ in commands]


class Peer(object):
    """A client in a child process that runs as (uid, gid, groups) before it connects.

    Without ``main``, the child waits for the parent's orders: ``call``/``pipeline`` send
    commands in one write and return their replies; ``read`` returns the next reply the server
    sends (a follower's messages). With ``main``, the child runs ``main(conn, lines)`` instead
    (``conn``: a ``ChildConn``; ``lines``: ``send`` reports to the parent, ``ready`` tells
    whether the parent wrote, ``recv`` reads it) and the parent uses ``order``/``report``.
    """

    def __init__(self, path, uid, gid, groups=(), main=None):
        self.uid, self.gid, self.groups = uid, gid, sorted(groups)
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child(path, uid, gid, list(groups), main, to_child_r, to_parent_w, (to_child_w, to_parent_r))
        self.pid = pid
        self.status = None
        os.close(to_child_r)
        os.close(to_parent_w)
        _PARENT_FDS.update((to_child_w, to_parent_r))
        self.lines = _Lines(to_parent_r, to_child_w)
        hello = self.report()
        if hello.get("hello") != {"uid": [uid] * 3, "gid": [gid] * 3, "groups": self.groups}:
            raise PeerFailed("the client under uid %d gid %d groups %s did not come up as asked: %r" % (uid, gid, self.groups, hello))

    def __repr__(self):
        return "Peer(uid=%d gid=%d groups=%s)" % (self.uid, self.gid, self.groups)

    def order(self, obj):
        self.lines.send(obj)

    def report(self, timeout=PATIENCE):
        """The child's next message; PeerFailed if it crashed, ended or said nothing in time."""
        try:
            message = self.lines.recv(timeout)
        except TimeoutError:
            raise PeerFailed("%r said nothing for %s s" % (self, timeout))
        if message is None:
            raise PeerFailed("%r ended (exit status %s)" % (self, self.wait()))
        if "failure" in message:
            raise PeerFailed("%r failed:\n%s" % (self, message["failure"]))
        return message

    def pipeline(self, commands):
        """Sends the commands in one write and returns their replies. If the server closes the
        connection first, the missing replies are the string 'EOF'."""
        self.order({"op": "send", "commands": [[str(a) for a in c] for c in commands]})
        message = self.report()
        replies = [from_json(r) for r in message["replies"]]
        return replies + ["EOF"] * (len(commands) - len(replies))

    def call(self, *args):
        return self.pipeline([args])[0]

    def read(self, timeout=PATIENCE):
        """The next reply the server sends unasked: (``"reply"``, reply), (``"eof"``, None) or
        (``"timeout"``, None)."""
        self.order({"op": "read", "timeout": timeout})
        message = self.report(timeout + PATIENCE)
        if "reply" in message:
            return "reply", from_json(message["reply"])
        return ("eof", None) if message.get("eof") else ("timeout", None)

    def wait(self, timeout=PATIENCE):
        """Waits for the child to end (killing it past the deadline); returns its exit status."""
        if self.status is None:
            deadline = deadline_after(timeout)
            while True:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    self.status = "killed after %s s" % timeout
                    break
                time.sleep(0.01)
            for fd in (self.lines.read_fd, self.lines.write_fd):
                _PARENT_FDS.discard(fd)
                os.close(fd)
        return self.status

    def close(self):
        """Tells the child to close its connection and exit; returns its exit status."""
        if self.status is None:
            try:
                self.order({"op": "exit"})
            except OSError:
                pass
        return self.wait()


def _child(path, uid, gid, groups, main, read_fd, write_fd, parent_ends):
    """The body of a Peer's child process; never returns."""
    code = 1
    lines = None
    try:
        for fd in list(_PARENT_FDS) + list(parent_ends):
            try:
                os.close(fd)
            except OSError:
                pass
        lines = _Lines(read_fd, write_fd)
        # The identity first (groups while still root), then the socket.
        os.setgroups(groups)
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(PATIENCE)
        sock.connect(path)
        lines.send({"hello": {"uid": list(os.getresuid()), "gid": list(os.getresgid()), "groups": sorted(os.getgroups())}})
        conn = ChildConn(sock)
        if main is not None:
            main(conn, lines)
        else:
            _obey(conn, lines)
        code = 0
    except BaseException:
        if lines is not None:
            try:
                lines.send({"failure": traceback.format_exc()})
            except BaseException:
                pass
    finally:
        os._exit(code)


def _obey(conn, lines):
    """Runs the parent's orders until it says exit or goes away."""
    while True:
        order = lines.recv()
        if order is None or order["op"] == "exit":
            return
        if order["op"] == "send":
            replies, eof = [], False
            try:
                conn.send(order["commands"])
                for _ in order["commands"]:
                    replies.append(to_json(conn.read()))
            except (EOFError, ConnectionResetError, BrokenPipeError):
                eof = True
            lines.send({"replies": replies, "eof": eof})
        elif order["op"] == "read":
            conn.sock.settimeout(order["timeout"])
            try:
                lines.send({"reply": to_json(conn.read())})
            except socket.timeout:
                lines.send({"timeout": True})
            except (EOFError, ConnectionResetError):
                lines.send({"eof": True})
            finally:
                conn.sock.settimeout(PATIENCE)
        else:
            raise ValueError("unknown order %r" % order)
