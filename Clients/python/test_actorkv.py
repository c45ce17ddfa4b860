"""Tests of the Python ActorKV client (standard library unittest only).

Run from the repository root::

    python3 -m unittest discover -s Clients/python -v

The reply-parser tests are pure. The others start a real ``actorkvd`` per test class in a
temporary directory: the binary is ``$ACTORKVD`` or ``<repo root>/.build/debug/actorkvd``.
Without a binary those tests are skipped, unless ``ACTORKV_REQUIRE_SERVER=1`` makes that a
failure (for CI).

With ``ACTORKV_ETCD=URL[,URL...]`` the servers are agents of that etcd cluster (cluster mode,
each under an etcd prefix of its own) and the tests whose behaviour differs there are skipped,
each saying why (Tests/Cluster/run.sh runs them so).
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import actorkv  # noqa: E402
from actorkv import (  # noqa: E402
    NOT_READY, ActorKVConnectionError, ActorKVError, Change, Client, CompactedError,
    ConflictError, ConnectionRefusedByServer, Lock, LockTimeout, PermissionDeniedError, ProtocolError, ReplyParser,
    ServerError, Snapshot, Synced, encode_command, parse_client_list, parse_info,
)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACTORKVD = os.environ.get("ACTORKVD") or os.path.join(REPO_ROOT, ".build", "debug", "actorkvd")
#: Upper bound for waiting on the server (start, stop); generous, never asserted on.
PATIENCE = 60.0
#: Cluster mode: the etcd endpoints the servers are agents of (None: local data directories).
ETCD = os.environ.get("ACTORKV_ETCD") or None


#: Milliseconds a PTTL may exceed the deadline asked for: in cluster mode a key expires at the
#: end of the second its deadline falls in (protocol.md, "Cluster mode").
DEADLINE_SLACK_MS = 1000 if ETCD else 0


def assert_pttl(test, pttl, low, high):
    """``low < pttl <= high`` (plus the cluster's slack), with the value in the message."""
    test.assertTrue(low < pttl <= high + DEADLINE_SLACK_MS, "PTTL %r not in (%d, %d]" % (pttl, low, high))


def local_only(reason):
    """Skips a test or class in cluster mode, for ``reason`` (a difference protocol.md states)."""
    return unittest.skipIf(ETCD is not None, "cluster mode: " + reason)


def require_server():
    """Skips (or, with ACTORKV_REQUIRE_SERVER=1, fails) when there is no actorkvd binary."""
    if os.path.isfile(ACTORKVD) and os.access(ACTORKVD, os.X_OK):
        return
    message = "actorkvd not found at %s (build it, or set ACTORKVD)" % ACTORKVD
    if os.environ.get("ACTORKV_REQUIRE_SERVER") == "1":
        raise RuntimeError(message)
    raise unittest.SkipTest(message)


#: The user a server runs as for this process, root, to be an ordinary client of it (the
#: server's own uid has every right under --acl): nobody, through setpriv.
NOBODY = 65534
SETPRIV = "/usr/bin/setpriv"
CAN_RUN_AS_NOBODY = os.geteuid() == 0 and os.access(SETPRIV, os.X_OK)
NEEDS_ROOT = ("needs root and %s: the server runs as uid %d so that this process lacks rights"
              % (SETPRIV, NOBODY))


class ServerProcess(object):
    """A real actorkvd in a private temporary directory (short path, for the socket); with
    ``as_nobody``, run as uid/gid 65534 (the directory is then that user's)."""

    def __init__(self, *flags, fsync="everysec", as_nobody=False):
        self.flags = list(flags)
        self.fsync = fsync
        self.as_nobody = as_nobody
        self.dir = tempfile.mkdtemp(prefix="akvpy.", dir="/tmp")
        if as_nobody:
            os.chown(self.dir, NOBODY, NOBODY)
            os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "s")
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "server.log")
        self.process = None
        # Cluster mode: its keys under a prefix of its own, kept across a restart.
        self.etcd_prefix = "py%d-%s/" % (os.getpid(), os.path.basename(self.dir).split(".")[-1])

    def start(self):
        """Starts the server and waits until it answers PING."""
        log = open(self.log_path, "ab")
        if ETCD is None:
            storage = ["--data-dir", self.data, "--fsync", self.fsync]
        else:
            storage = ["--etcd", ETCD, "--etcd-prefix", self.etcd_prefix]
        command = [ACTORKVD, "--socket", self.socket] + storage + self.flags
        if self.as_nobody:
            command = [SETPRIV, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                       "--clear-groups"] + command
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=log)
        finally:
            log.close()
        deadline = time.monotonic() + PATIENCE
        while True:
            if self.process.poll() is not None:
                raise AssertionError("actorkvd exited with %s while starting:\n%s"
                                     % (self.process.returncode, self.log()))
            try:
                with Client(self.socket, timeout=5) as client:
                    if client.ping() == "PONG":
                        return self
            except ServerError as error:  # before ActorKVConnectionError: a refusal is both
                if error.message.startswith("connection refused: "):
                    return self  # up, and its --allow-uid leaves this process out
                raise
            except ActorKVConnectionError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError("actorkvd did not answer PING:\n" + self.log())
            time.sleep(0.05)

    def client(self, timeout=30.0):
        """A new client of this server."""
        return Client(self.socket, timeout=timeout)

    def stop(self):
        """SIGTERM; returns the exit status. The caller checks it and the socket."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("actorkvd did not exit after SIGTERM:\n" + self.log())

    def kill(self):
        """SIGKILL (no clean shutdown)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(PATIENCE)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class ServerTestCase(unittest.TestCase):
    """One server for the whole class, stopped with SIGTERM at the end (which must exit 0 and
    remove the socket)."""

    server_flags = ()
    fsync = "everysec"

    @classmethod
    def setUpClass(cls):
        require_server()
        cls.server = ServerProcess(*cls.server_flags, fsync=cls.fsync)
        try:
            cls.server.start()
        except BaseException:
            cls.server.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        server = cls.server
        try:
            status = server.stop()
            if status != 0:
                raise AssertionError("actorkvd exited %s after SIGTERM:\n%s" % (status, server.log()))
            if os.path.exists(server.socket):
                raise AssertionError("actorkvd left its socket behind after SIGTERM")
        finally:
            server.cleanup()

    def setUp(self):
        self.kv = self.server.client()
        self.addCleanup(self.kv.close)
        # Each test its own namespace, so tests don't see each other's keys.
        self.ns = "t-" + self._testMethodName.replace("test_", "")[:50]


# ============================================================================================
# Pure tests: no server


def fake_listener(test, name):
    """A listening Unix socket `name`.sock in a temporary directory, for a test's hand-made
    server; both are cleaned up after `test`. Returns (path, listener)."""
    directory = tempfile.mkdtemp(prefix="akvpy.", dir="/tmp")
    test.addCleanup(shutil.rmtree, directory, True)
    path = os.path.join(directory, name + ".sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    test.addCleanup(listener.close)
    return path, listener


def assert_refused_before_sending(test, client, type_errors, value_errors):
    """Each call of ``type_errors`` raises TypeError and each of ``value_errors`` ValueError
    (``msg``: its index), and none of them connected ``client``."""
    for index, call in enumerate(type_errors):
        with test.assertRaises(TypeError, msg=index):
            call()
    for index, call in enumerate(value_errors):
        with test.assertRaises(ValueError, msg=index):
            call()
    test.assertFalse(client.connected)


def parse_all(data, piece=None):
    """Feeds ``data`` to a new parser (in pieces of ``piece`` bytes) and returns all replies."""
    parser = ReplyParser()
    replies = []
    step = piece or max(1, len(data))
    for i in range(0, len(data), step):
        parser.feed(data[i:i + step])
        while True:
            reply = parser.gets()
            if reply is NOT_READY:
                break
            replies.append(reply)
    if parser.in_reply:
        raise AssertionError("parser holds an incomplete reply")
    return replies


class ReplyParserTests(unittest.TestCase):
    STREAM = (b"+OK\r\n"
              b"-BADNS namespace name is empty\r\n"
              b":42\r\n"
              b":-7\r\n"
              b"$5\r\nhello\r\n"
              b"$0\r\n\r\n"
              b"$-1\r\n"
              b"$6\r\na\r\nb\x00\xff\r\n"
              b"*0\r\n"
              b"*-1\r\n"
              b"*2\r\n$2\r\nk1\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$-1\r\n"
              b"*3\r\n*1\r\n*1\r\n:1\r\n+OK\r\n-ERR x\r\n"
              b"-ERR\r\n")
    EXPECTED = [
        "OK",
        ServerError("BADNS", "namespace name is empty"),
        42,
        -7,
        b"hello",
        b"",
        None,
        b"a\r\nb\x00\xff",
        [],
        None,
        [b"k1", [b"a", b"1", b"b", None]],
        [[[1]], "OK", ServerError("ERR", "x")],
        ServerError("ERR", ""),
    ]

    def test_whole_stream(self):
        self.assertEqual(parse_all(self.STREAM), self.EXPECTED)

    def test_byte_by_byte(self):
        self.assertEqual(parse_all(self.STREAM, piece=1), self.EXPECTED)

    def test_every_piece_size(self):
        for piece in range(2, 40):
            self.assertEqual(parse_all(self.STREAM, piece=piece), self.EXPECTED, piece)

    def test_not_ready_until_complete(self):
        parser = ReplyParser()
        data = b"$10\r\n0123456789\r\n"
        for i, byte in enumerate(data):
            self.assertIs(parser.gets(), NOT_READY, i)
            parser.feed(bytes([byte]))
        self.assertEqual(parser.gets(), b"0123456789")
        self.assertIs(parser.gets(), NOT_READY)
        self.assertFalse(NOT_READY)

    def test_null_is_a_reply_not_not_ready(self):
        parser = ReplyParser()
        parser.feed(b"$-1\r\n")
        self.assertEqual(len(parser), 1)
        self.assertIsNone(parser.gets())
        self.assertIs(parser.gets(), NOT_READY)

    def test_large_bulk_in_chunks(self):
        payload = bytes(range(256)) * 20000 + b"\r\n"  # about 5 MB, with CR LF inside
        data = b"$%d\r\n%s\r\n+OK\r\n" % (len(payload), payload)
        self.assertEqual(parse_all(data, piece=65536), [payload, "OK"])

    def test_large_array_in_chunks(self):
        items = [b"key%06d" % i for i in range(20000)]
        data = b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(i), i) for i in items)
        self.assertEqual(parse_all(data, piece=1000), [items])

    def test_error_code_is_first_word(self):
        [error] = parse_all(b"-TOOBIG value is 9 bytes; the limit is 8\r\n")
        self.assertIsInstance(error, ServerError)
        self.assertIsInstance(error, ActorKVError)
        self.assertEqual(error.code, "TOOBIG")
        self.assertEqual(error.message, "value is 9 bytes; the limit is 8")
        self.assertEqual(str(error), "TOOBIG value is 9 bytes; the limit is 8")

    def test_malformed_replies(self):
        bad = [
            b"?what\r\n",
            b"hello\r\n",
            b":12x\r\n",
            b": 12\r\n",
            b"$abc\r\n",
            b"$-2\r\n",
            b"$3\r\nabcX\r\n",
            b"*x\r\n",
            b"*-5\r\n",
            b"*1\r\n!\r\n",
            b"+a\nb\r\n",
        ]
        for data in bad:
            with self.assertRaises(ProtocolError, msg=data):
                parse_all(data)
            with self.assertRaises(ProtocolError, msg=data):
                parse_all(data, piece=1)

    def test_failed_parser_stays_failed(self):
        parser = ReplyParser()
        with self.assertRaises(ProtocolError):
            parser.feed(b"?\r\n")
        with self.assertRaises(ProtocolError):
            parser.feed(b"+OK\r\n")

    def test_line_too_long(self):
        parser = ReplyParser()
        with self.assertRaises(ProtocolError):
            parser.feed(b"+" + b"x" * (ReplyParser.max_line_length + 10))

    def test_too_deep(self):
        with self.assertRaises(ProtocolError):
            parse_all(b"*1\r\n" * (ReplyParser.max_depth + 1) + b":1\r\n")
        depth = ReplyParser.max_depth
        value = parse_all(b"*1\r\n" * depth + b":1\r\n")[0]
        for _ in range(depth):
            value = value[0]
        self.assertEqual(value, 1)

    def test_bulk_limit(self):
        parser = ReplyParser(max_bulk_length=10)
        with self.assertRaises(ProtocolError):
            parser.feed(b"$11\r\n")


class EncodingTests(unittest.TestCase):
    def test_encode_command(self):
        self.assertEqual(encode_command("PUT", "ns", b"k\x00", "v\u00e9", 12),
                         b"*5\r\n$3\r\nPUT\r\n$2\r\nns\r\n$2\r\nk\x00\r\n"
                         b"$3\r\nv\xc3\xa9\r\n$2\r\n12\r\n")
        self.assertEqual(encode_command("PUT", "ns", bytearray(b"a"), memoryview(b"")),
                         b"*4\r\n$3\r\nPUT\r\n$2\r\nns\r\n$1\r\na\r\n$0\r\n\r\n")

    def test_encode_rejects(self):
        with self.assertRaises(ValueError):
            encode_command()
        with self.assertRaises(TypeError):
            encode_command("GET", "ns", None)
        with self.assertRaises(TypeError):
            encode_command("GET", "ns", 1.5)

    def test_parse_info(self):
        text = ("# Server\r\nactorkv_version:0.1.0\r\nfsync:always\r\nuptime_in_seconds:3\r\n\r\n"
                "# Namespaces\r\nnamespaces:1\r\n"
                "ns_config:keys=3,live_bytes=18,status=ok\r\n")
        info = parse_info(text)
        self.assertEqual(info["actorkv_version"], "0.1.0")
        self.assertEqual(info["fsync"], "always")
        self.assertEqual(info["uptime_in_seconds"], 3)
        self.assertEqual(info["ns_config"], {"keys": 3, "live_bytes": 18, "status": "ok"})
        self.assertEqual(parse_info(text.encode()), info)
        self.assertEqual(parse_info("ns_user%3A1:keys=2")["ns_user:1"], {"keys": 2})

    def test_parse_info_error_with_commas(self):
        """An unavailable namespace's error= text runs to the end of the line (protocol.md:
        ``status=unavailable,error=<file, offset, reason>``); commas in it, even ones followed
        by ``name=``, do not split it."""
        message = ("/srv/kv,keys=9/cfg/snapshot.json is corrupt at byte offset 7, "
                   "reason: expected ','; size=12, the file was left untouched")
        text = ("# Namespaces\r\nnamespaces:1\r\n"
                "ns_ok:keys=2,live_bytes=13,status=ok\r\n"
                "ns_cfg:status=unavailable,error=" + message + "\r\n"
                "socket:/tmp/a,b.sock\r\n")
        info = parse_info(text)
        self.assertEqual(info["ns_cfg"], {"status": "unavailable", "error": message})
        self.assertEqual(info["ns_ok"], {"keys": 2, "live_bytes": 13, "status": "ok"})
        self.assertEqual(info["socket"], "/tmp/a,b.sock")
        self.assertEqual(info["namespaces"], 1)
        # A field value with a comma not followed by name= stays whole, anywhere in the line.
        self.assertEqual(parse_info("ns_x:status=a, b,keys=1")["ns_x"],
                         {"status": "a, b", "keys": 1})

    def test_fake_server_not_reading_times_out(self):
        """A server that reads nothing: a large pipeline gives up after the timeout without
        progress (it neither hangs nor waits for the whole payload)."""
        # Never accepted: the connection's buffer fills, then nothing moves.
        path, _ = fake_listener(self, "stuck")
        client = Client(path, timeout=0.2)
        self.addCleanup(client.close)
        p = client.pipeline()
        for i in range(2000):
            p.put("ns", "k%d" % i, b"v" * 1000)
        with self.assertRaises(actorkv.ActorKVTimeoutError) as caught:
            p.execute()
        self.assertIn("sending", str(caught.exception))
        self.assertFalse(client.connected)

    def test_fake_server_fatal_error_while_sending(self):
        """A server that answers the first request, sends a fatal error and closes at once,
        leaving most of a large pipeline unsent: the failed send does not hide the replies
        that did arrive."""
        path, listener = fake_listener(self, "fatal")

        def serve():
            conn, _ = listener.accept()
            with conn:
                conn.recv(1024)
                # (A command's NOPERM is not fatal: PROTO is what a server sends before closing.)
                conn.sendall(b"+OK\r\n-PROTO invalid bulk length\r\n")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        client = Client(path, timeout=30)
        self.addCleanup(client.close)
        p = client.pipeline()
        for i in range(2000):
            p.put("ns", "k%d" % i, b"v" * 1000)
        results = p.execute(raise_on_error=False)
        thread.join(PATIENCE)
        self.assertEqual(results[0], True)
        self.assertEqual(results[1], ServerError("PROTO", "invalid bulk length"))
        self.assertEqual(len(results), 2000)
        self.assertTrue(all(type(r) is ActorKVConnectionError for r in results[2:]))
        self.assertFalse(client.connected)

    def test_batch_arguments_checked_before_sending(self):
        client = Client("/nonexistent/actorkv.sock", connect=False)
        for ops in ([], [("put", "k")], [("get", "k")], [("del",)], ["put"]):
            with self.assertRaises(ValueError, msg=ops):
                client.batch("ns", ops)
        with self.assertRaises(ValueError):
            client.delete("ns")
        with self.assertRaises(ValueError):
            client.exists("ns")

    def test_version_arguments_checked_before_sending(self):
        """A bad if_version, delta, batch version or max_attempts is refused before anything
        is sent: this client has no server, and sending would raise ActorKVConnectionError."""
        client = Client("/nonexistent/actorkv.sock", connect=False)
        type_errors = [
            lambda: client.put("ns", "k", "v", if_version=True),
            lambda: client.put("ns", "k", "v", if_version="3"),
            lambda: client.put("ns", "k", "v", if_version=1.0),
            lambda: client.delete("ns", "k", if_version=False),
            lambda: client.incr("ns", "k", 1.5),
            lambda: client.incr("ns", "k", "1"),
            lambda: client.incr("ns", "k", True),
            lambda: client.incr("ns", "k", None),
            lambda: client.batch("ns", [("ifversion", "k", "1")]),
            lambda: client.batch("ns", [("incr", "k", 2.0)]),
            lambda: client.update("ns", "k", lambda old: b"x", max_attempts=None),
        ]
        value_errors = [
            lambda: client.put("ns", "k", "v", if_version=-1),
            lambda: client.put("ns", "k", "v", if_version=1 << 63),
            lambda: client.delete("ns", "k", if_version=-5),
            lambda: client.delete("ns", "a", "b", if_version=1),
            lambda: client.incr("ns", "k", 1 << 63),
            lambda: client.incr("ns", "k", -(1 << 63) - 1),
            lambda: client.batch("ns", [("ifversion", "k", -1)]),
            lambda: client.batch("ns", [("incr", "k", 1 << 64)]),
            lambda: client.batch("ns", [("incr", "k")]),
            lambda: client.batch("ns", [("ifversion", "k")]),
            lambda: client.batch("ns", [("ifversion", "k", 1, 2)]),
            lambda: client.update("ns", "k", lambda old: b"x", max_attempts=0),
        ]
        assert_refused_before_sending(self, client, type_errors, value_errors)
        p = client.pipeline()
        with self.assertRaises(ValueError):
            p.put("ns", "k", "v", if_version=-1)
        with self.assertRaises(TypeError):
            p.incr("ns", "k", 0.5)
        self.assertEqual(len(p), 0)  # nothing queued
        # The largest values are accepted (they fail only at the missing server).
        with self.assertRaises(ActorKVConnectionError):
            client.incr("ns", "k", -(1 << 63))
        with self.assertRaises(ActorKVConnectionError):
            client.put("ns", "k", "v", if_version=(1 << 63) - 1)

    def test_connection_refused(self):
        directory = tempfile.mkdtemp(prefix="akvpy.", dir="/tmp")
        self.addCleanup(shutil.rmtree, directory, True)
        path = os.path.join(directory, "none.sock")
        with self.assertRaises(ActorKVConnectionError) as caught:
            Client(path, timeout=5)
        self.assertIsInstance(caught.exception, ConnectionError)  # the built-in one
        self.assertIsInstance(caught.exception, ActorKVError)
        self.assertIn(path, str(caught.exception))
        # A socket file that nobody listens on.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.close()
        with self.assertRaises(ActorKVConnectionError):
            Client(path, timeout=5)

    def test_fake_server_garbage_reply(self):
        """A reply that is not RESP raises ProtocolError and closes the connection."""
        path, listener = fake_listener(self, "fake")

        def serve():
            conn, _ = listener.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n")
                conn.recv(1024)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        client = Client(path, timeout=30)
        with self.assertRaises(ProtocolError):
            client.ping()
        self.assertFalse(client.connected)
        client.close()
        thread.join(PATIENCE)

    def test_fake_server_silent_times_out(self):
        """No reply within the timeout raises ActorKVTimeoutError and closes the connection."""
        path, _ = fake_listener(self, "silent")
        client = Client(path, timeout=0.2)
        self.addCleanup(client.close)
        with self.assertRaises(actorkv.ActorKVTimeoutError) as caught:
            client.ping()
        self.assertIsInstance(caught.exception, ActorKVConnectionError)
        self.assertIsInstance(caught.exception, TimeoutError)
        self.assertFalse(client.connected)


# ============================================================================================
# Against a real server


class RoundTripTests(ServerTestCase):
    server_flags = ("--max-value-bytes", str(4 << 20))

    def test_ping(self):
        self.assertEqual(self.kv.ping(), "PONG")
        self.assertEqual(self.kv.ping("hello there"), b"hello there")
        self.assertEqual(self.kv.ping(b"\x00\xff"), b"\x00\xff")

    def test_socket_from_environment(self):
        """Client() without a path connects to $ACTORKV_SOCKET, read when it is created; a
        path given wins; an empty $ACTORKV_SOCKET means ./actorkv.sock, as unset does."""
        self.kv.put(self.ns, "where", "here")
        missing = os.path.join(self.server.dir, "no-server.sock")
        with mock.patch.dict(os.environ, {"ACTORKV_SOCKET": self.server.socket}):
            with Client(timeout=30) as kv:
                self.assertEqual(kv.path, self.server.socket)
                self.assertEqual(kv.get(self.ns, "where"), b"here")
            with Client(None, timeout=30, connect=False) as kv:
                self.assertEqual(kv.path, self.server.socket)
        with mock.patch.dict(os.environ, {"ACTORKV_SOCKET": missing}):
            with Client(self.server.socket, timeout=30) as kv:
                self.assertEqual(kv.path, self.server.socket)
                self.assertEqual(kv.get(self.ns, "where"), b"here")
            with self.assertRaises(ActorKVConnectionError) as caught:
                Client(timeout=30)
            self.assertIn(missing, str(caught.exception))
        for value in ("", None):
            environment = {k: v for k, v in os.environ.items() if k != "ACTORKV_SOCKET"}
            if value is not None:
                environment["ACTORKV_SOCKET"] = value
            with mock.patch.dict(os.environ, environment, clear=True):
                client = Client(connect=False)
                self.assertEqual(client.path, "./actorkv.sock", repr(value))
                self.assertEqual(client.path, actorkv.DEFAULT_SOCKET)

    def test_put_get_str_and_bytes(self):
        self.assertIs(self.kv.put(self.ns, "theme", "dark"), True)
        self.assertEqual(self.kv.get(self.ns, "theme"), b"dark")
        self.assertEqual(self.kv.get(self.ns, b"theme"), b"dark")
        self.kv.put(self.ns, b"theme", b"light")
        self.assertEqual(self.kv.get(self.ns, "theme"), b"light")
        self.kv.put(self.ns, "caf\u00e9", "\u2603 snow")
        self.assertEqual(self.kv.get(self.ns, "caf\u00e9".encode()), "\u2603 snow".encode())
        self.kv.put(self.ns, "n", 42)
        self.assertEqual(self.kv.get(self.ns, "n"), b"42")

    def test_binary_values_and_keys(self):
        values = {
            b"nul": b"a\x00b",
            b"crlf": b"line1\r\nline2\r\n",
            b"ff": b"\xff\xfe\xff",
            b"all": bytes(range(256)) * 3,
            b"empty": b"",
            b"star": b"*1\r\n$3\r\nGET\r\n",
            b"\x00key\r\n\xff": b"binary key",
        }
        for key, value in values.items():
            self.kv.put(self.ns, key, value)
        for key, value in values.items():
            self.assertEqual(self.kv.get(self.ns, key), value, key)
        self.assertEqual(self.kv.get(self.ns, b"empty"), b"")  # empty, not missing

    @local_only("etcd takes requests of at most 1.5 MiB")
    def test_large_value(self):
        value = os.urandom(4 << 20)  # exactly the limit this server was given
        self.kv.put(self.ns, "big", value)
        self.assertEqual(self.kv.get(self.ns, "big"), value)
        with self.assertRaises(ServerError) as caught:
            self.kv.put(self.ns, "bigger", value + b"x")
        self.assertEqual(caught.exception.code, "TOOBIG")
        self.assertIsNone(self.kv.get(self.ns, "bigger"))
        self.assertEqual(self.kv.ping(), "PONG")

    def test_missing(self):
        self.assertIsNone(self.kv.get(self.ns, "nope"))
        self.assertIsNone(self.kv.get("never-created", "nope"))
        self.assertEqual(self.kv.count("never-created"), 0)
        self.assertEqual(self.kv.exists("never-created", "a"), 0)
        self.assertEqual(self.kv.delete("never-created", "a"), 0)
        self.assertEqual(list(self.kv.scan("never-created")), [])
        self.assertNotIn("never-created", self.kv.namespaces())

    def test_delete_and_exists_counts(self):
        for key in ("a", "b", "c"):
            self.kv.put(self.ns, key, "v")
        self.assertEqual(self.kv.exists(self.ns, "a", "b", "x"), 2)
        self.assertEqual(self.kv.exists(self.ns, "a", "a"), 2)
        self.assertEqual(self.kv.count(self.ns), 3)
        self.assertEqual(self.kv.delete(self.ns, "a", "b", "x"), 2)
        self.assertEqual(self.kv.delete(self.ns, "a", "b"), 0)
        self.assertEqual(self.kv.delete(self.ns, "c", "c"), 1)
        self.assertEqual(self.kv.count(self.ns), 0)
        self.assertIsNone(self.kv.get(self.ns, "c"))

    def test_scan_many_pages_with_prefix(self):
        expected = {}
        with self.kv.pipeline() as p:
            for i in range(1000):
                prefix = ("user:", "item:", "us", "zz")[i % 4]
                key = ("%s%04d" % (prefix, i)).encode()
                value = b"v\x00%d" % i
                p.put(self.ns, key, value)
                if key.startswith(b"user:"):
                    expected[key] = value
            p.execute()
        self.assertEqual(len(expected), 250)
        got = list(self.kv.scan(self.ns, prefix="user:", count=7))  # 36 pages
        self.assertEqual([k for k, _ in got], sorted(expected))
        self.assertEqual(dict(got), expected)
        everything = list(self.kv.scan(self.ns, count=33))
        self.assertEqual(len(everything), 1000)
        self.assertEqual([k for k, _ in everything], sorted(k for k, _ in everything))
        self.assertEqual(len(list(self.kv.scan(self.ns, prefix=b"us"))), 500)
        self.assertEqual(list(self.kv.scan(self.ns, prefix="none")), [])
        # One page can hold everything.
        cursor, page = self.kv.scan_page(self.ns, count=100000)
        self.assertEqual(cursor, b"0")
        self.assertEqual(len(page), 1000)

    def test_scan_pages_and_cursor(self):
        for key in ("a", "b", "c"):
            self.kv.put(self.ns, key, key.upper())
        cursor, page = self.kv.scan_page(self.ns, b"0", count=2)
        self.assertEqual(page, [(b"a", b"A"), (b"b", b"B")])
        self.assertNotEqual(cursor, b"0")
        self.kv.put(self.ns, "ab", "inserted behind the cursor")
        self.kv.put(self.ns, "bb", "inserted ahead")
        cursor, page = self.kv.scan_page(self.ns, cursor, count=2)
        self.assertEqual(page, [(b"bb", b"inserted ahead"), (b"c", b"C")])
        self.assertEqual(cursor, b"0")  # nothing after: the scan is over
        cursor, page = self.kv.scan_page(self.ns, b"k" + b"c".hex().encode(), count=2)
        self.assertEqual((cursor, page), (b"0", []))
        with self.assertRaises(ServerError) as caught:
            self.kv.scan_page(self.ns, b"not-a-cursor")
        self.assertEqual(caught.exception.code, "BADCURSOR")
        with self.assertRaises(ServerError) as caught:
            self.kv.scan_page(self.ns, b"0", count=0)
        self.assertEqual(caught.exception.code, "ERR")

    def test_scan_interleaved_with_writes(self):
        for i in range(50):
            self.kv.put(self.ns, "k%02d" % i, "x")
        seen = []
        for key, _ in self.kv.scan(self.ns, count=5):
            seen.append(key)
            self.kv.delete(self.ns, key)  # other commands between pages are fine
        self.assertEqual(len(seen), 50)
        self.assertEqual(self.kv.count(self.ns), 0)

    def test_batch_results(self):
        self.kv.put(self.ns, "old", "1")
        results = self.kv.batch(self.ns, [
            ("put", "a", "1"),
            ("PUT", b"b", b"\x00\xff"),
            ("del", "old"),
            ("del", "old"),
            ("del", "a"),
            ("Put", "a", "2"),
        ])
        self.assertEqual(results, [True, True, 1, 0, 1, True])
        self.assertEqual(self.kv.get(self.ns, "a"), b"2")
        self.assertEqual(self.kv.get(self.ns, "b"), b"\x00\xff")
        self.assertIsNone(self.kv.get(self.ns, "old"))

    def test_batch_all_or_nothing(self):
        self.kv.put(self.ns, "keep", "original")
        with self.assertRaises(ServerError) as caught:
            self.kv.batch(self.ns, [("put", "x", "1"), ("del", "keep"), ("put", "", "empty key")])
        self.assertEqual(caught.exception.code, "BADKEY")
        self.assertIsNone(self.kv.get(self.ns, "x"))
        self.assertEqual(self.kv.get(self.ns, "keep"), b"original")
        with self.assertRaises(ServerError) as caught:
            self.kv.batch(self.ns, [("put", "x", "1"), ("put", "y", b"v" * ((4 << 20) + 1))])
        self.assertEqual(caught.exception.code, "TOOBIG")
        self.assertIsNone(self.kv.get(self.ns, "x"))
        # An op the server does not know (sent raw, as the client refuses it).
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("BATCH", self.ns, "PUT", "x", "1", "JUMP", "x")
        self.assertEqual(caught.exception.code, "ERR")
        self.assertIn("nothing was applied", caught.exception.message)
        self.assertIsNone(self.kv.get(self.ns, "x"))
        self.assertEqual(self.kv.count(self.ns), 1)

    def test_server_errors(self):
        cases = [
            (lambda: self.kv.put("a/b", "k", "v"), "BADNS"),
            (lambda: self.kv.get("", "k"), "BADNS"),
            (lambda: self.kv.get(".hidden", "k"), "BADNS"),
            (lambda: self.kv.get("x" * 65, "k"), "BADNS"),
            (lambda: self.kv.execute_command("FOO"), "ERR"),
            (lambda: self.kv.execute_command("GET", self.ns), "ERR"),
            (lambda: self.kv.execute_command("SCAN", self.ns, "0", "LIMIT", "3"), "ERR"),
            (lambda: self.kv.put(self.ns, "", "v"), "BADKEY"),
            (lambda: self.kv.get(self.ns, "k" * (64 * 1024 + 1)), "BADKEY"),
            (lambda: self.kv.get(self.ns, ""), "BADKEY"),
        ]
        for call, code in cases:
            if code is None:
                call()
                continue
            with self.assertRaises(ServerError) as caught:
                call()
            self.assertEqual(caught.exception.code, code, caught.exception)
            self.assertTrue(caught.exception.message)
            # The connection stays usable after an error reply.
            self.assertEqual(self.kv.ping(), "PONG")
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("FOO", "bar")
        self.assertEqual(str(caught.exception),
                         "ERR unknown command 'FOO'; ActorKV keeps keys in namespaces: "
                         "see protocol.md \"Differences from Redis\"")

    def test_pipeline(self):
        with self.kv.pipeline() as p:
            for i in range(200):
                p.put(self.ns, "k%03d" % i, "v%d" % i)
            p.get(self.ns, "k007").exists(self.ns, "k000", "nope").count(self.ns)
            p.delete(self.ns, "k000").ping().scan_page(self.ns, count=2)
            self.assertEqual(len(p), 206)
            results = p.execute()
            self.assertEqual(len(p), 0)
        self.assertEqual(results[:200], [True] * 200)
        self.assertEqual(results[200:205], [b"v7", 1, 200, 1, "PONG"])
        self.assertEqual(results[205], (b"k" + b"k002".hex().encode(), [(b"k001", b"v1"), (b"k002", b"v2")]))
        self.assertEqual(self.kv.pipeline().execute(), [])

    def test_pipeline_errors(self):
        p = self.kv.pipeline()
        p.put(self.ns, "a", "1").put("bad/ns", "a", "1").get(self.ns, "a")
        results = p.execute(raise_on_error=False)
        self.assertEqual(results[0], True)
        self.assertIsInstance(results[1], ServerError)
        self.assertEqual(results[1].code, "BADNS")
        self.assertEqual(results[2], b"1")
        p.execute_command("NOSUCH").put(self.ns, "b", "2")
        with self.assertRaises(ServerError) as caught:
            p.execute()
        self.assertEqual(caught.exception.code, "ERR")
        # Every reply was read: the connection is in step, and the later command ran.
        self.assertEqual(self.kv.get(self.ns, "b"), b"2")

    def test_pipeline_beyond_output_limit(self):
        """100,000 GETs of a 1000-byte value: about 100 MB of replies, far beyond the server's
        1 MiB of unread output per client, after which it reads no more requests until the
        client reads. Sending everything before reading stalled (and with timeout=None hung
        forever); replies must be read while the pipeline is being sent."""
        value = bytes(range(250)) * 4
        self.kv.put(self.ns, "v", value)
        self.kv.put(self.ns, "small", "0123456789")
        self.kv.timeout = 20.0  # finite: a stall fails the test instead of hanging it
        p = self.kv.pipeline()
        for _ in range(100000):
            p.get(self.ns, "v")
        p.get(self.ns, "small")
        results = p.execute()
        self.assertEqual(len(results), 100001)
        self.assertEqual(results[-1], b"0123456789")
        self.assertTrue(all(result == value for result in results[:-1]))
        self.assertEqual(self.kv.ping(), "PONG")  # in step afterwards

    def test_pipeline_of_large_puts_and_gets(self):
        """Large requests and large replies in one pipeline: 24 PUTs of 512 KiB values, each
        followed by a GET of it (12 MiB each way)."""
        self.kv.timeout = 20.0
        values = [os.urandom(512 * 1024) for _ in range(24)]
        p = self.kv.pipeline()
        for i, value in enumerate(values):
            p.put(self.ns, "big%d" % i, value).get(self.ns, "big%d" % i)
        p.count(self.ns)
        results = p.execute()
        self.assertEqual(len(results), 49)
        self.assertEqual(results[0:48:2], [True] * 24)
        for i, value in enumerate(values):
            self.assertEqual(results[2 * i + 1], value, i)
        self.assertEqual(results[48], 24)
        self.assertEqual(self.kv.get(self.ns, "big23"), values[23])

    def test_pipeline_discarded_on_exit(self):
        with self.kv.pipeline() as p:
            p.put(self.ns, "never", "sent")
        self.assertIsNone(self.kv.get(self.ns, "never"))

    @local_only("INFO shows the etcd cluster, without fsync and namespace lines")
    def test_info_and_namespaces(self):
        self.kv.put(self.ns, "k", "v")
        text = self.kv.info()
        self.assertIsInstance(text, str)
        self.assertIn("fsync:everysec", text)
        info = self.kv.info_dict()
        self.assertEqual(info["fsync"], "everysec")
        self.assertEqual(info["socket"], self.server.socket)
        self.assertGreaterEqual(info["connected_clients"], 1)
        self.assertEqual(info["ns_" + self.ns]["keys"], 1)
        self.assertEqual(info["ns_" + self.ns]["status"], "ok")
        names = self.kv.namespaces()
        self.assertIn(self.ns, names)
        self.assertTrue(all(isinstance(n, str) for n in names))
        # A name with Redis's ':' (written %3A in INFO's field) comes back as given.
        self.kv.put(self.ns + ":1", "k", "v")
        self.assertEqual(self.kv.info_dict()["ns_" + self.ns + ":1"]["keys"], 1)
        self.assertIn(self.ns + ":1", self.kv.namespaces())

    def test_compact(self):
        for i in range(100):
            self.kv.put(self.ns, "k%d" % (i % 10), "v%d" % i)
        self.assertIs(self.kv.compact(self.ns), True)
        self.assertEqual(self.kv.count(self.ns), 10)
        self.assertEqual(self.kv.get(self.ns, "k9"), b"v99")
        self.assertIs(self.kv.compact("never-created-either"), True)
        with self.assertRaises(ServerError) as caught:
            self.kv.compact("bad/name")
        self.assertEqual(caught.exception.code, "BADNS")

    def test_client_list_and_kill(self):
        with self.server.client() as holder:
            holder.put(self.ns, "lock", "me", ephemeral=True)
            holder_id = holder.client_id()
            listed = self.kv.client_list()
            ids = [entry["id"] for entry in listed]
            self.assertEqual(ids, sorted(ids), "in id order")
            self.assertIn(self.kv.client_id(), ids)
            entry = [entry for entry in listed if entry["id"] == holder_id]
            self.assertEqual(len(entry), 1, listed)
            self.assertEqual((entry[0]["pid"], entry[0]["uid"]), (os.getpid(), os.getuid()))
            self.assertEqual(entry[0]["cmd"], "client|id", "the holder's last command")
            self.assertIsInstance(entry[0]["idle"], int)
            self.assertTrue(self.kv.kill_client(holder_id))
            deadline = time.monotonic() + 5
            while self.kv.get(self.ns, "lock") is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertIsNone(self.kv.get(self.ns, "lock"), "the killed holder's lock is released")
            self.assertNotIn(holder_id, [entry["id"] for entry in self.kv.client_list()])
            self.assertFalse(self.kv.kill_client(holder_id), "gone already")
        for bad, error in ((0, ValueError), ("7", TypeError), (True, TypeError)):
            with self.assertRaises(error):
                self.kv.kill_client(bad)
        self.assertEqual(parse_client_list(b"id=3 addr=/s.sock name= age=12 flags=N\nid=4 name=w flags=UP\n"),
                         [{"id": 3, "addr": "/s.sock", "name": "", "age": 12, "flags": "N"},
                          {"id": 4, "name": "w", "flags": "UP"}])

    def test_unlink(self):
        self.kv.put(self.ns, "k", "v")
        version = self.kv.getv(self.ns, "k")[1]
        self.assertIn(self.ns, self.kv.namespaces())
        self.assertEqual(self.kv.unlink(self.ns, self.ns + "-missing"), 1)
        self.assertNotIn(self.ns, self.kv.namespaces())
        self.assertIsNone(self.kv.get(self.ns, "k"))
        self.assertIsNone(self.kv.put(self.ns, "k", "w", if_version=version), "a version of its earlier life guards nothing")
        self.assertGreater(self.kv.put(self.ns, "k", "w", if_version=0), version)
        self.assertEqual(self.kv.unlink(self.ns + "-missing"), 0)
        with self.assertRaises(ValueError):
            self.kv.unlink()
        with self.assertRaises(ServerError) as caught:
            self.kv.unlink("bad/name")
        self.assertEqual(caught.exception.code, "BADNS")

    def test_wait_durable(self):
        self.kv.put(self.ns, "k", "v")
        self.assertIs(self.kv.wait_durable(), True)
        self.assertIs(self.kv.wait_durable(timeout_ms=5000), True)
        with self.assertRaises(ValueError):
            self.kv.wait_durable(timeout_ms=-1)
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("WAITAOF", 1, 1, 0)
        self.assertIn("no replicas", str(caught.exception))
        self.assertEqual(self.kv.get(self.ns, "k"), b"v")

    @local_only("an agent keeps no data directory (BACKUP is refused)")
    def test_backup(self):
        self.kv.put(self.ns, "k", "v")
        version = self.kv.getv(self.ns, "k")[1]
        target = os.path.join(self.server.dir, "copy-%d" % os.getpid())
        previous = os.getcwd()
        os.chdir(self.server.dir)
        try:
            self.assertEqual(self.kv.backup(os.path.basename(target)), target, "relative to this process")
        finally:
            os.chdir(previous)
        with self.assertRaises(ServerError) as caught:
            self.kv.backup(target)
        self.assertEqual(caught.exception.code, "ERR")
        self.assertIn("exists already", caught.exception.message)
        self.kv.put(self.ns, "k", "after")
        copy = ServerProcess()
        copy.data = target
        copy.start()
        try:
            with copy.client() as other:
                self.assertEqual(other.getv(self.ns, "k"), (b"v", version))
        finally:
            copy.stop()
            copy.cleanup()

    @unittest.skipIf(ETCD is not None, "an agent refuses RENAME (test_rename_refused_by_an_agent)")
    def test_rename(self):
        tmp, live = self.ns + "-tmp", self.ns + "-live"
        self.kv.put(tmp, "theme", "dark")
        self.kv.put(live, "theme", "light")
        self.kv.put(live, "stale", "x")
        self.assertIs(self.kv.rename(tmp, live), True)
        self.assertEqual((self.kv.get(live, "theme"), self.kv.get(live, "stale"), self.kv.count(tmp)), (b"dark", None, 0))
        self.kv.put(tmp, "theme", "blue")
        self.assertIs(self.kv.rename(tmp, live, replace=False), False)
        self.assertEqual(self.kv.get(live, "theme"), b"dark", "RENAMENX changed nothing")
        with self.assertRaises(ServerError) as caught:
            self.kv.rename(self.ns + "-nosuch", live)
        self.assertEqual((caught.exception.code, caught.exception.message), ("ERR", "no such key"))

    @unittest.skipIf(ETCD is not None, "an agent refuses MEMORY USAGE (test_memory_usage_refused_by_an_agent)")
    def test_memory_usage(self):
        self.assertIsNone(self.kv.memory_usage(self.ns), "a namespace that holds no key")
        self.kv.put(self.ns, "theme", "dark")
        one = self.kv.memory_usage(self.ns)
        self.assertIsInstance(one, int)
        self.assertGreater(one, 8192 + 9, "a namespace's own 8 KiB and the key's 9 bytes")
        self.kv.put(self.ns, "blob", b"x" * 1000, ttl=600)
        self.assertGreaterEqual(self.kv.memory_usage(self.ns), one + 1004, "grown by at least the new key's bytes")
        self.kv.delete(self.ns, "blob")
        self.assertEqual(self.kv.memory_usage(self.ns), one, "back to the one key's figure")

    @unittest.skipIf(ETCD is None, "cluster mode only")
    def test_memory_usage_refused_by_an_agent(self):
        self.kv.put(self.ns, "k", "v")
        with self.assertRaises(ServerError) as caught:
            self.kv.memory_usage(self.ns)
        self.assertIn("not available in cluster mode", caught.exception.message)
        self.assertEqual(self.kv.get(self.ns, "k"), b"v", "the connection still answers")

    @unittest.skipIf(ETCD is not None, "an agent refuses COPY (test_copy_refused_by_an_agent)")
    def test_copy(self):
        template, user = self.ns + "-template", self.ns + "-user"
        self.kv.put(template, "theme", "dark", ttl=600)
        self.kv.put(user, "stale", "x")
        self.assertIs(self.kv.copy(template, user), False, "without replace, a namespace that holds a key stays")
        self.assertEqual(self.kv.get(user, "stale"), b"x")
        self.assertIs(self.kv.copy(template, user, replace=True), True)
        self.assertEqual((self.kv.get(user, "theme"), self.kv.get(user, "stale"), self.kv.get(template, "theme")), (b"dark", None, b"dark"))
        self.assertGreater(self.kv.pttl(user, "theme"), 590000, "the key's deadline was copied with it")
        self.assertIs(self.kv.copy(self.ns + "-nosuch", user + "2"), False)
        self.assertEqual(self.kv.count(user + "2"), 0)
        with self.assertRaises(ServerError) as caught:
            self.kv.copy(user, user)
        self.assertIn("source and destination objects are the same", caught.exception.message)

    @unittest.skipIf(ETCD is None, "cluster mode only")
    def test_copy_refused_by_an_agent(self):
        self.kv.put(self.ns, "k", "v")
        with self.assertRaises(ServerError) as caught:
            self.kv.copy(self.ns, self.ns + "-new")
        self.assertIn("not available in cluster mode", caught.exception.message)
        self.assertEqual(self.kv.count(self.ns + "-new"), 0)

    @unittest.skipIf(ETCD is None, "cluster mode only")
    def test_rename_refused_by_an_agent(self):
        self.kv.put(self.ns, "k", "v")
        with self.assertRaises(ServerError) as caught:
            self.kv.rename(self.ns, self.ns + "-new")
        self.assertIn("not available in cluster mode", caught.exception.message)
        self.assertEqual(self.kv.get(self.ns, "k"), b"v")

    @unittest.skipIf(ETCD is None, "cluster mode only")
    def test_backup_refused_by_an_agent(self):
        with self.assertRaises(ServerError) as caught:
            self.kv.backup(os.path.join(self.server.dir, "copy"))
        self.assertEqual(caught.exception.code, "ERR")
        self.assertIn("etcdctl snapshot save", caught.exception.message)
        self.assertFalse(os.path.exists(os.path.join(self.server.dir, "copy")))

    def test_two_clients_share_state(self):
        with self.server.client() as other:
            self.kv.put(self.ns, "shared", "from one")
            self.assertEqual(other.get(self.ns, "shared"), b"from one")
            other.delete(self.ns, "shared")
            self.assertIsNone(self.kv.get(self.ns, "shared"))

    def test_context_manager_quit_and_reconnect(self):
        with self.server.client() as client:
            self.assertTrue(client.connected)
            client.put(self.ns, "k", "v")
        self.assertFalse(client.connected)
        self.assertEqual(client.get(self.ns, "k"), b"v")  # connects again on demand
        client.quit()
        self.assertFalse(client.connected)
        client.close()
        client.close()

    def test_raw_inline_request_on_same_server(self):
        """The server also takes inline commands; the client's values are readable by them."""
        self.kv.put(self.ns, "inline", "a b\r\n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(30)
            raw.connect(self.server.socket)
            raw.sendall(b"GET " + self.ns.encode() + b" inline\r\nQUIT\r\n")
            data = b""
            while True:
                chunk = raw.recv(4096)
                if not chunk:
                    break
                data += chunk
        self.assertEqual(data, b"$5\r\na b\r\n\r\n+OK\r\n")


#: A worker process of the concurrency tests: its own Client, started before the race and
#: released by a line on stdin. argv: client dir, socket, namespace, key, mode, count. Prints
#: how many times its update function ran beyond one per update (the conflicts it met).
WORKER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from actorkv import Client
socket_path, namespace, key, mode, count = sys.argv[2:7]
calls = [0]

def add_one(old):
    calls[0] += 1
    return str(int(old if old is not None else b"0") + 1)

with Client(socket_path, timeout=60) as kv:
    kv.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(int(count)):
        if mode == "update":
            kv.update(namespace, key, add_one)
        else:
            kv.incr(namespace, key)
print(calls[0] - int(count) if mode == "update" else 0, flush=True)
"""


class VersionTests(ServerTestCase):
    """GETV, PUT ... IFVERSION, INCR, guarded BATCHes and update(), on a real server."""

    def run_workers(self, mode, key, processes=8, each=50):
        """Runs ``processes`` worker processes at once, each doing ``each`` increments of
        ``key`` by ``mode`` ("update" or "incr"); returns the conflicts they report."""
        workers = []
        client_dir = os.path.dirname(os.path.abspath(actorkv.__file__))
        try:
            for _ in range(processes):
                workers.append(subprocess.Popen(
                    [sys.executable, "-c", WORKER, client_dir,
                     self.server.socket, self.ns, key, mode, str(each)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            for worker in workers:  # every one connected before any starts
                if worker.stdout.readline() != b"ready\n":
                    worker.wait(PATIENCE)
                    self.fail("a worker did not start: "
                              + worker.stderr.read().decode("utf-8", "replace"))
            for worker in workers:
                worker.stdin.write(b"go\n")
                worker.stdin.flush()
            conflicts = []
            for worker in workers:
                out, err = worker.communicate(timeout=PATIENCE)
                self.assertEqual(worker.returncode, 0, err.decode("utf-8", "replace"))
                conflicts.append(int(out))
            return conflicts
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait(PATIENCE)
                for stream in (worker.stdin, worker.stdout, worker.stderr):
                    stream.close()

    def test_getv_absent_and_present(self):
        self.assertIsNone(self.kv.getv(self.ns, "k"))
        self.assertIsNone(self.kv.getv("never-created-getv", "k"))
        self.assertNotIn("never-created-getv", self.kv.namespaces())
        self.kv.put(self.ns, "k", b"\x00v\r\n")
        value, version = self.kv.getv(self.ns, "k")
        self.assertEqual(value, b"\x00v\r\n")
        self.assertIsInstance(version, int)
        self.assertGreaterEqual(version, 1)
        self.kv.put(self.ns, "empty", b"")
        self.assertEqual(self.kv.getv(self.ns, "empty")[0], b"")  # empty, not absent
        self.kv.delete(self.ns, "k")
        self.assertIsNone(self.kv.getv(self.ns, "k"))

    def test_versions_increase(self):
        versions = []
        for i in range(5):
            self.kv.put(self.ns, "k", "v%d" % i)
            versions.append(self.kv.getv(self.ns, "k")[1])
        self.kv.put(self.ns, "other", "x")  # another key's write also moves the namespace on
        self.kv.put(self.ns, "k", "last")
        versions.append(self.kv.getv(self.ns, "k")[1])
        self.assertEqual(versions, sorted(set(versions)), versions)
        self.assertEqual(versions[4] - versions[0], 4)
        self.assertEqual(versions[5] - versions[4], 2)
        # Reading does not change the version.
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"last", versions[5]))
        self.assertEqual(self.kv.incr(self.ns, "n"), 1)
        self.assertGreater(self.kv.getv(self.ns, "n")[1], versions[5])

    def test_put_if_version(self):
        self.assertIs(self.kv.put(self.ns, "k", "one"), True)  # unchanged without if_version
        _, version = self.kv.getv(self.ns, "k")
        new = self.kv.put(self.ns, "k", "two", if_version=version)
        self.assertIsInstance(new, int)
        self.assertGreater(new, version)
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"two", new))
        # The version read before that write is stale now.
        self.assertIsNone(self.kv.put(self.ns, "k", "three", if_version=version))
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"two", new))
        self.assertIsNone(self.kv.put(self.ns, "k", "three", if_version=new + 1000))
        self.assertIsNone(self.kv.put(self.ns, "k", "three", if_version=0))
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"two", new))
        # A refused write logs nothing: the next write is the very next version.
        self.assertEqual(self.kv.put(self.ns, "k", "four", if_version=new), new + 1)
        self.assertEqual(self.kv.get(self.ns, "k"), b"four")

    def test_put_if_version_zero_creates_only_when_absent(self):
        version = self.kv.put(self.ns, "lock", "me", if_version=0)
        self.assertIsInstance(version, int)
        self.assertEqual(self.kv.getv(self.ns, "lock"), (b"me", version))
        self.assertIsNone(self.kv.put(self.ns, "lock", "you", if_version=0))
        self.assertEqual(self.kv.getv(self.ns, "lock"), (b"me", version))
        self.kv.delete(self.ns, "lock")
        self.assertIsNotNone(self.kv.put(self.ns, "lock", "you", if_version=0))
        self.assertEqual(self.kv.get(self.ns, "lock"), b"you")
        # In a namespace that does not exist yet too.
        self.assertIsNotNone(self.kv.put(self.ns + "-new", "k", "v", if_version=0))
        self.kv.delete(self.ns + "-new", "k")

    def test_incr(self):
        self.assertEqual(self.kv.incr(self.ns, "n"), 1)  # absent counts as 0
        self.assertEqual(self.kv.incr(self.ns, "n"), 2)
        self.assertEqual(self.kv.incr(self.ns, "n", 10), 12)
        self.assertEqual(self.kv.incr(self.ns, "n", -20), -8)
        self.assertEqual(self.kv.incr(self.ns, "n", 0), -8)
        self.assertEqual(self.kv.get(self.ns, "n"), b"-8")  # stored as ASCII decimal
        self.kv.put(self.ns, "m", "41")
        self.assertEqual(self.kv.incr(self.ns, "m"), 42)
        self.assertEqual(self.kv.incr(self.ns, "big", -(1 << 63)), -(1 << 63))
        self.assertEqual(self.kv.get(self.ns, "big"), b"-9223372036854775808")
        self.assertEqual(self.kv.incr(self.ns, "big", (1 << 63) - 1), -1)

    def test_incr_not_an_integer(self):
        for stored in (b"dark", b"", b"1.5", b"007", b"+1", b" 1", b"-0", b"9223372036854775808"):
            self.kv.put(self.ns, "k", stored)
            before = self.kv.getv(self.ns, "k")
            with self.assertRaises(ServerError) as caught:
                self.kv.incr(self.ns, "k")
            self.assertEqual(caught.exception.code, "ERR", stored)
            self.assertEqual(caught.exception.message, "value is not an integer", stored)
            self.assertTrue(self.kv.connected)
            self.assertEqual(self.kv.getv(self.ns, "k"), before, stored)  # nothing written
            self.assertEqual(self.kv.ping(), "PONG")
        self.assertEqual(self.kv.incr(self.ns, "other"), 1)  # the connection is in step

    def test_incr_overflow(self):
        self.kv.put(self.ns, "max", "9223372036854775807")
        self.kv.put(self.ns, "min", "-9223372036854775808")
        before = (self.kv.getv(self.ns, "max"), self.kv.getv(self.ns, "min"))
        for key, delta in (("max", 1), ("min", -1), ("max", (1 << 63) - 1), ("min", -(1 << 63))):
            with self.assertRaises(ServerError) as caught:
                self.kv.incr(self.ns, key, delta)
            self.assertEqual(caught.exception.code, "ERR")
            self.assertEqual(caught.exception.message, "increment or decrement would overflow")
        self.assertEqual((self.kv.getv(self.ns, "max"), self.kv.getv(self.ns, "min")), before)
        self.assertEqual(self.kv.incr(self.ns, "max", -1), (1 << 63) - 2)
        self.assertEqual(self.kv.incr(self.ns, "min", 1), -(1 << 63) + 1)

    def test_delete_if_version(self):
        self.kv.put(self.ns, "k", "v")
        _, version = self.kv.getv(self.ns, "k")
        self.assertIs(self.kv.delete(self.ns, "k", if_version=version + 1), False)
        self.assertIs(self.kv.delete(self.ns, "k", if_version=0), False)
        self.assertEqual(self.kv.get(self.ns, "k"), b"v")
        self.assertIs(self.kv.delete(self.ns, "k", if_version=version), True)
        self.assertIsNone(self.kv.getv(self.ns, "k"))
        self.assertIs(self.kv.delete(self.ns, "k", if_version=version), False)
        self.assertIs(self.kv.delete(self.ns, "k", if_version=0), True)  # absent: holds
        self.assertIsNone(self.kv.get(self.ns, "k"))
        self.assertEqual(self.kv.delete(self.ns, "k"), 0)  # without if_version: a count

    def test_batch_guard_and_incr(self):
        self.kv.put(self.ns, "k2", "v2")
        _, version = self.kv.getv(self.ns, "k2")
        results = self.kv.batch(self.ns, [
            ("ifversion", "k2", version),
            ("IFVERSION", "fresh", 0),
            ("del", "k2"),
            ("incr", "deletes", 1),
            ("Incr", "deletes", 41),
            ("put", "fresh", "new"),
            ("ifversion", "k2", 0),  # sees the DEL before it
        ])
        self.assertEqual(results, [True, True, 1, 1, 42, True, True])
        self.assertIsNone(self.kv.get(self.ns, "k2"))
        self.assertEqual(self.kv.get(self.ns, "deletes"), b"42")
        self.assertEqual(self.kv.get(self.ns, "fresh"), b"new")
        # Every key the batch wrote has the same version.
        self.assertEqual(self.kv.getv(self.ns, "deletes")[1], self.kv.getv(self.ns, "fresh")[1])
        self.assertGreater(self.kv.getv(self.ns, "fresh")[1], version)

    def test_batch_failed_guard_applies_nothing(self):
        self.kv.put(self.ns, "a", "1")
        self.kv.put(self.ns, "n", "10")
        before = {key: self.kv.getv(self.ns, key) for key in ("a", "n")}
        _, version = before["a"]
        for ops in (
            [("ifversion", "a", version - 1), ("put", "a", "2"), ("incr", "n", 5)],
            [("incr", "n", 5), ("put", "b", "x"), ("ifversion", "a", 0)],
            [("del", "a"), ("ifversion", "a", version)],  # the guard sees the DEL
            [("put", "b", "x"), ("ifversion", "b", 0)],   # and the PUT
            [("ifversion", "a", version), ("ifversion", "missing", 1), ("del", "n")],
        ):
            self.assertIsNone(self.kv.batch(self.ns, ops), ops)
            self.assertEqual({key: self.kv.getv(self.ns, key) for key in ("a", "n")}, before, ops)
            self.assertIsNone(self.kv.get(self.ns, "b"), ops)
        self.assertEqual(self.kv.count(self.ns), 2)
        # An INCR of a non-integer, or one that overflows, refuses the whole batch with
        # INCR's error.
        self.kv.put(self.ns, "a", "text")
        self.kv.put(self.ns, "max", str((1 << 63) - 1))
        for ops, message in (
            ([("put", "b", "x"), ("incr", "n", 1), ("incr", "a", 1)], "value is not an integer"),
            ([("put", "b", "x"), ("incr", "n", 1), ("incr", "max", 1)],
             "increment or decrement would overflow"),
        ):
            with self.assertRaises(ServerError) as caught:
                self.kv.batch(self.ns, ops)
            self.assertEqual(caught.exception.code, "ERR")
            self.assertEqual(caught.exception.message, message)
            self.assertIsNone(self.kv.get(self.ns, "b"))
            self.assertEqual(self.kv.getv(self.ns, "n"), before["n"])

    def test_pipeline_versions(self):
        """The new commands queue in a pipeline; each sees the writes pipelined before it."""
        with self.kv.pipeline() as p:
            p.put(self.ns, "k", "a", if_version=0).getv(self.ns, "k")
            p.put(self.ns, "k", "b", if_version=0)
            p.incr(self.ns, "n").incr(self.ns, "n", 5)
            p.batch(self.ns, [("ifversion", "k", 0), ("del", "k")])
            p.batch(self.ns, [("incr", "n", -6), ("put", "k", "c")])
            p.delete(self.ns, "k", if_version=0).put(self.ns, "plain", "p")
            results = p.execute()
        self.assertEqual(len(results), 9)
        first = results[0]
        self.assertIsInstance(first, int)
        self.assertEqual(results[1], (b"a", first))
        self.assertEqual(results[2:7], [None, 1, 6, None, [0, True]])
        self.assertEqual(results[7:], [False, True])
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"c", first + 3))

    def test_update_absent_key(self):
        seen = []

        def create(old):
            seen.append(old)
            return "created" if old is None else old + b"+"

        self.assertEqual(self.kv.update(self.ns, "k", create), b"created")
        self.assertEqual(self.kv.update(self.ns, "k", create), b"created+")
        self.assertEqual(seen, [None, b"created"])
        self.assertEqual(self.kv.get(self.ns, "k"), b"created+")
        # An int is written in decimal, and returned as the bytes written.
        self.assertEqual(self.kv.update(self.ns, "n", lambda old: int(old or 0) + 1), b"1")
        self.assertEqual(self.kv.update(self.ns, "n", lambda old: int(old or 0) + 1), b"2")

    def test_update_returning_none_deletes(self):
        self.kv.put(self.ns, "k", "v")
        seen = []
        self.assertIsNone(self.kv.update(self.ns, "k", lambda old: seen.append(old)))
        self.assertEqual(seen, [b"v"])
        self.assertIsNone(self.kv.get(self.ns, "k"))
        # Absent and None: nothing to do, nothing written.
        self.assertIsNone(self.kv.update(self.ns, "k", lambda old: seen.append(old)))
        self.assertEqual(seen, [b"v", None])
        self.assertEqual(self.kv.count(self.ns), 0)

    def test_update_retries_after_conflict(self):
        """Another client writes between update's read and its write, twice: update calls fn
        again with the newer value each time and writes what the last call returned."""
        other = self.server.client()
        self.addCleanup(other.close)
        self.kv.put(self.ns, "k", "0")
        seen = []

        def interfere(old):
            seen.append(old)
            if len(seen) <= 2:
                other.put(self.ns, "k", b"other%d" % len(seen))
            return old + b"!"

        self.assertEqual(self.kv.update(self.ns, "k", interfere), b"other2!")
        self.assertEqual(seen, [b"0", b"other1", b"other2"])
        self.assertEqual(self.kv.get(self.ns, "k"), b"other2!")
        # A conditional delete that loses the race is retried as well.
        seen[:] = []

        def delete_unless_changed(old):
            seen.append(old)
            if len(seen) == 1:
                other.put(self.ns, "k", "changed")
            return None

        self.assertIsNone(self.kv.update(self.ns, "k", delete_unless_changed))
        self.assertEqual(seen, [b"other2!", b"changed"])
        self.assertIsNone(self.kv.get(self.ns, "k"))
        # And so is a creation, when someone else created the key first.
        seen[:] = []

        def create(old):
            seen.append(old)
            if old is None:
                other.put(self.ns, "k", "theirs")
                return "mine"
            return old + b"+mine"

        self.assertEqual(self.kv.update(self.ns, "k", create), b"theirs+mine")
        self.assertEqual(seen, [None, b"theirs"])

    def test_update_gives_up_with_conflict_error(self):
        other = self.server.client()
        self.addCleanup(other.close)
        self.kv.put(self.ns, "k", "start")
        calls = []

        def always_overtaken(old):
            calls.append(old)
            other.put(self.ns, "k", "other%d" % len(calls))
            return "mine"

        with self.assertRaises(ConflictError) as caught:
            self.kv.update(self.ns, "k", always_overtaken, max_attempts=5)
        self.assertIsInstance(caught.exception, ActorKVError)
        self.assertIn("5 attempts", str(caught.exception))
        self.assertEqual(len(calls), 5)
        self.assertEqual(self.kv.get(self.ns, "k"), b"other5")  # update wrote nothing
        self.assertTrue(self.kv.connected)
        # An exception from fn propagates, and nothing is written.
        with self.assertRaises(ZeroDivisionError):
            self.kv.update(self.ns, "k", lambda old: 1 // 0)
        with self.assertRaises(TypeError):
            self.kv.update(self.ns, "k", lambda old: 1.5)  # not a value put takes
        self.assertEqual(self.kv.get(self.ns, "k"), b"other5")

    def test_update_concurrent_processes(self):
        """8 processes, each with its own client, each update() a decimal counter 50 times at
        once: no update is lost."""
        conflicts = self.run_workers("update", "counter")
        self.assertEqual(self.kv.get(self.ns, "counter"), b"400", "conflicts: %s" % conflicts)

    def test_incr_concurrent_processes(self):
        self.run_workers("incr", "counter")
        self.assertEqual(self.kv.get(self.ns, "counter"), b"400")
        self.assertEqual(self.kv.incr(self.ns, "counter", 0), 400)

    def test_counter_example(self):
        """Clients/examples/counter.py: 4 processes x 25 with incr and with update."""
        script = os.path.join(REPO_ROOT, "Clients", "examples", "counter.py")
        run = subprocess.run(
            [sys.executable, script, "--socket", self.server.socket, "--namespace", self.ns,
             "--processes", "4", "--count", "25"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=PATIENCE)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn(b"visits=100 doc.count=100", run.stdout)
        self.assertEqual(self.kv.get(self.ns, "visits"), b"100")
        self.assertEqual(self.kv.get(self.ns, "doc"), b'{"count": 100}')


class LimitsTests(ServerTestCase):
    """A server with small framing limits, to see PROTO errors close the connection."""

    server_flags = ("--max-bulk-bytes", "4096", "--max-value-bytes", "1024")

    def test_toobig_keeps_connection(self):
        with self.assertRaises(ServerError) as caught:
            self.kv.put(self.ns, "k", b"x" * 2000)
        self.assertEqual(caught.exception.code, "TOOBIG")
        self.assertTrue(self.kv.connected)
        self.assertEqual(self.kv.ping(), "PONG")

    def test_proto_error_closes_connection(self):
        with self.assertRaises(ServerError) as caught:
            self.kv.put(self.ns, "k", b"x" * 5000)
        self.assertEqual(caught.exception.code, "PROTO")
        self.assertFalse(self.kv.connected)
        self.assertEqual(self.kv.ping(), "PONG")  # a new connection
        self.assertIsNone(self.kv.get(self.ns, "k"))

    def test_proto_error_in_pipeline(self):
        p = self.kv.pipeline()
        p.put(self.ns, "a", "1").put(self.ns, "k", b"x" * 5000).get(self.ns, "a")
        results = p.execute(raise_on_error=False)
        self.assertEqual(results[0], True)
        self.assertEqual(results[1].code, "PROTO")
        self.assertIsInstance(results[2], ActorKVConnectionError)
        self.assertEqual(self.kv.get(self.ns, "a"), b"1")

    def test_proto_error_early_in_large_pipeline(self):
        """PROTO while about 2 MB of the pipeline are still unsent: the replies before the
        error and the error itself are returned in their places, the rest as connection
        errors (the server half-closes after PROTO and discards what follows)."""
        p = self.kv.pipeline()
        p.put(self.ns, "a", "1").put(self.ns, "k", b"x" * 5000)
        for i in range(2000):
            p.put(self.ns, "after%d" % i, b"y" * 1000)
        results = p.execute(raise_on_error=False)
        self.assertEqual(len(results), 2002)
        self.assertEqual(results[0], True)
        self.assertIsInstance(results[1], ServerError)
        self.assertEqual(results[1].code, "PROTO")
        self.assertTrue(all(isinstance(r, ActorKVConnectionError) for r in results[2:]))
        self.assertFalse(self.kv.connected)
        self.assertEqual(self.kv.get(self.ns, "a"), b"1")  # a new connection
        self.assertEqual(self.kv.exists(self.ns, "k", "after0", "after1999"), 0)


class LifecycleTests(unittest.TestCase):
    """Restarts and crashes: each test runs its own servers."""

    def setUp(self):
        require_server()

    def start(self, server):
        self.addCleanup(server.cleanup)
        return server.start()

    def assert_clean_stop(self, server):
        self.assertEqual(server.stop(), 0, server.log())
        self.assertFalse(os.path.exists(server.socket), "socket left behind")

    def test_data_survives_restart(self):
        server = self.start(ServerProcess())
        with server.client() as kv:
            kv.put("cfg", "theme", "dark")
            kv.put("cfg", b"bin", b"\x00\r\n\xff")
            kv.batch("other", [("put", "a", "1"), ("put", "b", "2"), ("del", "a")])
            for i in range(300):
                kv.put("many", "k%03d" % i, "v%d" % i)
            kv.compact("many")
            kv.put("many", "after-compact", "yes")
        self.assert_clean_stop(server)

        server.start()  # same data directory
        with server.client() as kv:
            self.assertEqual(kv.get("cfg", "theme"), b"dark")
            self.assertEqual(kv.get("cfg", "bin"), b"\x00\r\n\xff")
            self.assertIsNone(kv.get("other", "a"))
            self.assertEqual(kv.get("other", "b"), b"2")
            self.assertEqual(kv.count("many"), 301)
            self.assertEqual(kv.get("many", "k299"), b"v299")
            self.assertEqual(kv.get("many", "after-compact"), b"yes")
            self.assertEqual(sorted(kv.namespaces()), ["cfg", "many", "other"])
        self.assert_clean_stop(server)

    def test_shutdown_returns_once_the_server_has_shut_down(self):
        server = self.start(ServerProcess())
        with server.client() as kv:
            kv.put("cfg", "theme", "dark")
            self.assertIsNone(kv.shutdown())
            self.assertFalse(kv.connected)
            self.assertFalse(os.path.exists(server.socket), "the socket is gone by the time shutdown() returns")
            with self.assertRaises(actorkv.ActorKVConnectionError, msg="no server to reach now"):
                kv.shutdown()
        self.assertEqual(server.process.wait(timeout=30), 0, server.log())
        self.assertIn("shut down cleanly (SHUTDOWN from connection ", server.log())
        server.start()  # same data directory
        with server.client() as kv:
            self.assertEqual(kv.get("cfg", "theme"), b"dark")
        self.assert_clean_stop(server)

    def test_kill_9_keeps_acknowledged_puts(self):
        """Under --fsync always, every put the server acknowledged survives SIGKILL."""
        server = self.start(ServerProcess(fsync="always"))
        acknowledged = []
        enough = threading.Event()
        stopped = threading.Event()
        failure = []

        def writer():
            try:
                with server.client() as kv:
                    i = 0
                    while not stopped.is_set() and i < 100000:
                        key = "k%06d" % i
                        kv.put("crash", key, "value-%d" % i)
                        acknowledged.append(key)  # only after +OK arrived
                        if i % 5 == 4:
                            kv.batch("crash", [("put", key + "b", "batch-%d" % i)])
                            acknowledged.append(key + "b")
                        if len(acknowledged) >= 300:
                            enough.set()
                        i += 1
            except ActorKVConnectionError:
                pass  # the server was killed under us
            except BaseException as error:  # pragma: no cover - reported below
                failure.append(error)
            finally:
                enough.set()

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        self.assertTrue(enough.wait(PATIENCE), "writer made no progress")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(PATIENCE)
        thread.join(PATIENCE)
        stopped.set()
        self.assertFalse(failure, failure)
        self.assertFalse(thread.is_alive())
        self.assertGreaterEqual(len(acknowledged), 300)
        self.assertTrue(os.path.exists(server.socket), "a SIGKILLed server leaves its socket")

        server.start()  # removes the stale socket
        with server.client() as kv:
            missing = []
            for key in acknowledged:
                want = ("batch-%d" % int(key[1:7]) if key.endswith("b")
                        else "value-%d" % int(key[1:]))
                if kv.get("crash", key) != want.encode():
                    missing.append(key)
            self.assertEqual(missing, [], "acknowledged writes lost after kill -9")
            self.assertGreaterEqual(kv.count("crash"), len(acknowledged))
        self.assert_clean_stop(server)

    def test_max_clients(self):
        server = self.start(ServerProcess("--max-clients", "1"))
        first = None
        for _ in range(600):  # until the server has noticed that start()'s client left
            candidate = server.client()
            try:
                candidate.ping()
                first = candidate
                break
            except ServerError as error:
                self.assertEqual(error.code, "MAXCLIENTS")
                candidate.close()
                time.sleep(0.1)
        self.assertIsNotNone(first, "no client ever got the one slot")
        self.addCleanup(first.close)
        second = server.client()
        self.addCleanup(second.close)
        with self.assertRaises(ServerError) as caught:
            second.ping()
        self.assertEqual(caught.exception.code, "MAXCLIENTS")
        # Also a "cannot connect" error, as the CLI treats it (exit 4).
        self.assertIsInstance(caught.exception, ConnectionRefusedByServer)
        self.assertIsInstance(caught.exception, ActorKVConnectionError)
        self.assertFalse(second.connected)
        self.assertEqual(first.ping(), "PONG")
        first.close()
        self.assert_clean_stop(server)

    @local_only("no data files to damage")
    def test_info_of_unavailable_namespace(self):
        """INFO's error= text holds the file's path, here with a comma and '=' in it; it
        comes back whole from info_dict."""
        server = ServerProcess()
        server.data = os.path.join(server.dir, "data,keys=7")
        self.start(server)
        with server.client() as kv:
            kv.put("broken", "k", "v")
            kv.compact("broken")
        self.assert_clean_stop(server)
        snapshot = os.path.join(server.data, "broken", "snapshot.json")
        self.assertTrue(os.path.exists(snapshot), os.listdir(os.path.join(server.data, "broken")))
        with open(snapshot, "wb") as f:
            f.write(b"not json")
        server.start()
        with server.client() as kv:
            fields = kv.info_dict()["ns_broken"]
            self.assertEqual(set(fields), {"status", "error"}, fields)
            self.assertEqual(fields["status"], "unavailable")
            self.assertIn(snapshot, fields["error"])
            line = [l for l in kv.info().splitlines() if l.startswith("ns_broken:")][0]
            self.assertEqual(line, "ns_broken:status=unavailable,error=" + fields["error"])
            with self.assertRaises(ServerError) as caught:
                kv.get("broken", "k")
            self.assertEqual(caught.exception.code, "CORRUPT")
        self.assert_clean_stop(server)

    def test_sigterm_with_connected_client(self):
        server = self.start(ServerProcess())
        kv = server.client()
        self.addCleanup(kv.close)
        kv.put("ns", "k", "v")
        self.assert_clean_stop(server)
        with self.assertRaises(ActorKVConnectionError):
            kv.get("ns", "k")
        with self.assertRaises(ActorKVConnectionError):
            server.client()


# ============================================================================================
# Change feeds (CHANGES)


def bulk(data):
    data = actorkv._to_bytes(data)
    return b"$%d\r\n%s\r\n" % (len(data), data)


def push(kind, ns, seq, flat=None):
    """A CHANGES message as the server sends it: ``*3`` kind ns :seq, or ``*4`` with the
    ``*2N`` key/value list ``flat`` (None in it for ``$-1``)."""
    parts = [b"*%d\r\n" % (3 if flat is None else 4), bulk(kind), bulk(ns), b":%d\r\n" % seq]
    if flat is not None:
        parts.append(b"*%d\r\n" % len(flat))
        parts += [b"$-1\r\n" if item is None else bulk(item) for item in flat]
    return b"".join(parts)


def scripted_server(test, name, sessions):
    """A hand-made server that accepts one connection per session ``(bytes to send)``: it
    reads one request, records it (as a list of bytes) in the returned list, sends the bytes
    and closes the connection. Returns (path, requests, thread)."""
    path, listener = fake_listener(test, name)
    requests = []

    def serve():
        for data in sessions:
            conn, _ = listener.accept()
            with conn:
                parser = ReplyParser()
                request = NOT_READY
                while request is NOT_READY:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    parser.feed(chunk)
                    request = parser.gets()
                requests.append(request)
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    test.addCleanup(thread.join, PATIENCE)
    return path, requests, thread


def take(feed, count, what=None, timeout=PATIENCE):
    """The next ``count`` events of ``feed`` (of the classes ``what``, others skipped);
    fails if they do not come within ``timeout`` seconds."""
    events = []
    deadline = time.monotonic() + timeout
    while len(events) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("only %d of %d events came: %r" % (len(events), count, events))
        event = feed.next_event(remaining)
        if event is not None and (what is None or isinstance(event, what)):
            events.append(event)
    return events


def rest(feed, wait=0.3):
    """The events that come until none has for ``wait`` seconds."""
    events = []
    while True:
        event = feed.next_event(wait)
        if event is None:
            return events
        events.append(event)


def last_sequence(kv, ns):
    """The namespace's last sequence, from INFO (0 if it does not exist); in cluster mode the
    cluster's revision, which sequences are."""
    if ETCD is not None:
        return int(kv.info_dict()["etcd_revision"])
    fields = kv.info_dict().get("ns_" + ns)
    return fields["last_sequence"] if fields else 0


class ChangeFeedFakeServerTests(unittest.TestCase):
    """The feed's resume logic against scripted servers: what it sends after each kind of
    loss, and that it delivers nothing twice."""

    def test_resumes_after_lagging_from_the_last_change_delivered(self):
        path, requests, _ = scripted_server(self, "lag", [
            push("changes", "cfg", 5) + push("change", "cfg", 6, ["a", "1"])
            + push("change", "cfg", 7, ["b", None, "c", "3"])
            + b"-LAGGING resume from sequence 7 of namespace 'cfg'\r\n",
            push("changes", "cfg", 7) + push("change", "cfg", 8, ["a", "2"])
            + push("synced", "cfg", 8),
        ])
        with actorkv.ChangeFeed(path, "cfg", prefix="a", timeout=10) as feed:
            self.assertEqual(feed.start_seq, 5)
            events = take(feed, 4)
            self.assertEqual(events, [
                Change("cfg", 6, [(b"a", b"1")]),
                Change("cfg", 7, [(b"b", None), (b"c", b"3")]),
                Change("cfg", 8, [(b"a", b"2")]),
                Synced("cfg", 8),
            ])
            self.assertEqual(feed.reconnects, 1)
            self.assertEqual(feed.seq, 8)
        self.assertEqual(requests, [
            [b"CHANGES", b"cfg", b"PREFIX", b"a"],
            [b"CHANGES", b"cfg", b"PREFIX", b"a", b"FROM", b"7"],
        ])

    def test_resumes_after_unavailable_in_cluster_mode(self):
        # An agent that lost etcd ends the stream with -UNAVAILABLE, and refuses CHANGES with
        # it until etcd is back: the feed keeps trying, then resumes FROM its last change.
        path, requests, _ = scripted_server(self, "unav", [
            push("changes", "cfg", 5) + push("change", "cfg", 6, ["a", "1"])
            + b"-UNAVAILABLE the change feed lost etcd: no etcd member answered; resume with CHANGES cfg FROM the last sequence received\r\n",
            b"-UNAVAILABLE no etcd member answered: 127.0.0.1:2379: connection refused\r\n",
            push("changes", "cfg", 6) + push("change", "cfg", 7, ["a", "2"]) + push("synced", "cfg", 7),
        ])
        with actorkv.ChangeFeed(path, "cfg", timeout=10, reconnect_timeout=None) as feed:
            self.assertEqual(take(feed, 3), [Change("cfg", 6, [(b"a", b"1")]), Change("cfg", 7, [(b"a", b"2")]),
                                             Synced("cfg", 7)])
        self.assertEqual(requests, [[b"CHANGES", b"cfg"]] + [[b"CHANGES", b"cfg", b"FROM", b"6"]] * 2)

    def test_resume_before_any_change_uses_the_header_sequence(self):
        path, requests, _ = scripted_server(self, "hdr", [
            push("changes", "n", 41) + push("synced", "n", 41),
            push("changes", "n", 41) + push("change", "n", 42, ["k", "v"]),
        ])
        with actorkv.ChangeFeed(path, "n", timeout=10) as feed:
            self.assertEqual(take(feed, 2), [Synced("n", 41), Change("n", 42, [(b"k", b"v")])])
        self.assertEqual(requests, [[b"CHANGES", b"n"], [b"CHANGES", b"n", b"FROM", b"41"]])

    def test_snapshot_cut_off_is_asked_for_again_whole(self):
        first = ["k%04d" % i for i in range(3)]
        path, requests, _ = scripted_server(self, "snap", [
            # The connection ends after one snapshot message: more might have followed.
            push("changes", "n", 3) + push("snapshot", "n", 3, [first[0], "old"]),
            push("changes", "n", 4) + push("snapshot", "n", 4, [first[0], "x", first[1], "y"])
            + push("snapshot", "n", 4, [first[2], "z"]) + push("change", "n", 5, [first[0], None])
            + push("synced", "n", 5),
        ])
        with actorkv.ChangeFeed(path, "n", snapshot=True, timeout=10) as feed:
            self.assertIsNone(feed.seq)
            self.assertEqual(take(feed, 3), [
                Snapshot("n", 4, [(b"k0000", b"x"), (b"k0001", b"y"), (b"k0002", b"z")]),
                Change("n", 5, [(b"k0000", None)]),
                Synced("n", 5),
            ])
        self.assertEqual(requests, [[b"CHANGES", b"n", b"SNAPSHOT"]] * 2)

    def test_compacted_on_resume_is_raised_and_closes_the_feed(self):
        path, requests, _ = scripted_server(self, "compacted", [
            push("changes", "n", 9) + push("change", "n", 10, ["k", "v"]),
            b"-COMPACTED oldest available sequence is 30\r\n",
        ])
        feed = actorkv.ChangeFeed(path, "n", from_seq=9, timeout=10)
        self.addCleanup(feed.close)
        self.assertEqual(feed.next_event(PATIENCE), Change("n", 10, [(b"k", b"v")]))
        with self.assertRaises(CompactedError) as caught:
            feed.next_event(PATIENCE)
        self.assertIsInstance(caught.exception, ServerError)
        self.assertEqual(caught.exception.code, "COMPACTED")
        self.assertEqual(caught.exception.oldest, 30)
        self.assertTrue(feed.closed)
        self.assertEqual(list(feed), [])
        self.assertEqual(requests[1], [b"CHANGES", b"n", b"FROM", b"10"])

    def test_mirror_takes_a_new_snapshot_when_compacted(self):
        path, requests, _ = scripted_server(self, "mirror", [
            push("changes", "n", 2) + push("snapshot", "n", 2, ["a", "1", "b", "2"])
            + push("synced", "n", 2) + push("change", "n", 3, ["a", None]),
            b"-COMPACTED oldest available sequence is 50\r\n",
            push("changes", "n", 60) + push("snapshot", "n", 60, ["c", "3"])
            + push("synced", "n", 60),
        ])
        mirror = actorkv.Mirror(path, "n", timeout=10)
        self.addCleanup(mirror.close)
        data = mirror.data
        self.assertTrue(mirror.wait_synced(PATIENCE))
        self.assertEqual(mirror.data, {b"a": b"1", b"b": b"2"})
        self.assertEqual(mirror.next_event(PATIENCE), Change("n", 3, [(b"a", None)]))
        self.assertEqual(mirror.data, {b"b": b"2"})
        self.assertEqual(mirror.next_event(PATIENCE), Snapshot("n", 60, [(b"c", b"3")]))
        self.assertEqual((mirror.data, mirror.seq, mirror.synced), ({b"c": b"3"}, 60, False))
        self.assertTrue(mirror.wait_synced(PATIENCE))
        self.assertIs(mirror.data, data)
        self.assertEqual(requests, [[b"CHANGES", b"n", b"SNAPSHOT"],
                                    [b"CHANGES", b"n", b"FROM", b"3"],
                                    [b"CHANGES", b"n", b"SNAPSHOT"]])

    def test_gives_up_after_reconnect_timeout(self):
        path, requests, thread = scripted_server(self, "gone", [push("changes", "n", 1)])
        feed = actorkv.ChangeFeed(path, "n", timeout=10, reconnect_timeout=0.5)
        self.addCleanup(feed.close)
        thread.join(PATIENCE)
        os.unlink(path)  # nobody listens any more
        started = time.monotonic()
        with self.assertRaises(ActorKVConnectionError) as caught:
            feed.next_event(PATIENCE)
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn("could not resume", str(caught.exception))
        self.assertTrue(feed.closed)

    def test_arguments_checked_before_sending(self):
        client = Client("/nonexistent/actorkv.sock", connect=False)
        with self.assertRaises(ValueError):
            client.changes("ns", from_seq=-1)
        with self.assertRaises(TypeError):
            client.changes("ns", from_seq="3")
        with self.assertRaises(ValueError):
            client.changes("ns", from_seq=3, snapshot=True)
        with self.assertRaises(ValueError):
            client.changes("ns", reconnect_timeout=-1)
        with self.assertRaises(ActorKVConnectionError):  # well-formed: fails at the server
            client.changes("ns", from_seq=3)

    def test_compacted_error_from_any_reply(self):
        error = parse_all(b"-COMPACTED oldest available sequence is 1234\r\n")[0]
        self.assertIsInstance(error, CompactedError)
        self.assertEqual(error.oldest, 1234)
        self.assertEqual(error, ServerError("COMPACTED", "oldest available sequence is 1234"))
        self.assertNotIsInstance(parse_all(b"-ERR x 5\r\n")[0], CompactedError)


def pipeline_server(test, name, replies):
    """A hand-made server for one connection: it reads ``len(replies)`` requests, then sends
    ``replies`` (bytes) at once, then answers each further request ``+PONG`` until the client
    closes. Returns (path, requests, thread)."""
    path, listener = fake_listener(test, name)
    requests = []

    def serve():
        conn, _ = listener.accept()
        with conn:
            parser = ReplyParser()
            expected = len(replies)
            while True:
                while True:
                    request = parser.gets()
                    if request is NOT_READY:
                        break
                    requests.append(request)
                    try:
                        if len(requests) == expected:
                            conn.sendall(b"".join(replies))
                        elif len(requests) > expected:
                            conn.sendall(b"+PONG\r\n")
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the client hung up first (told to go away, it need not read on)
                chunk = conn.recv(4096)
                if not chunk:
                    return
                parser.feed(chunk)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    test.addCleanup(thread.join, PATIENCE)
    return path, requests, thread


class PermissionErrorTests(unittest.TestCase):
    """NOPERM as a client sees it, without a server: a command's is a PermissionDeniedError
    that leaves the connection usable; the one refusing a connection on accept is not."""

    DENIED = b"-NOPERM no write permission on namespace 'config' for uid 33\r\n"
    REFUSED = b"-NOPERM connection refused: uid 33 gid 33 is not allowed to connect\r\n"

    def test_parser_tells_a_commands_noperm_from_a_refused_connection(self):
        denied, refused, other = parse_all(self.DENIED + self.REFUSED + b"-NOPERM\r\n")
        self.assertIsInstance(denied, PermissionDeniedError)
        self.assertIsInstance(denied, ServerError)
        self.assertEqual((denied.code, denied.message),
                         ("NOPERM", "no write permission on namespace 'config' for uid 33"))
        self.assertEqual(str(denied), "NOPERM no write permission on namespace 'config' for uid 33")
        self.assertNotIsInstance(refused, PermissionDeniedError)
        self.assertEqual((type(refused), refused.code), (ConnectionRefusedByServer, "NOPERM"))
        self.assertIsInstance(refused, ServerError)
        self.assertIsInstance(refused, ActorKVConnectionError)
        self.assertIsInstance(other, PermissionDeniedError)
        self.assertIn("PermissionDeniedError", actorkv.__all__)

    def test_which_errors_close_the_connection(self):
        closes = actorkv._closes_connection
        self.assertFalse(closes(ServerError("NOPERM", "no read permission on namespace 'a' for uid 1")))
        self.assertFalse(closes(ServerError("NOPERM", "only the server's own uid 0 may run ACL LOAD; "
                                                      "this connection is uid 1")))
        self.assertTrue(closes(ServerError("NOPERM", "connection refused: uid 1 gid 1 is not allowed "
                                                     "to connect")))
        for code in ("PROTO", "MAXCLIENTS", "LAGGING"):
            self.assertTrue(closes(ServerError(code, "x")), code)
        for code in ("ERR", "BADNS", "COMPACTED", "EXECABORT"):
            self.assertFalse(closes(ServerError(code, "x")), code)

    def test_a_commands_noperm_leaves_the_connection_and_the_pipeline_going(self):
        path, requests, _ = pipeline_server(self, "perm", [b"+OK\r\n", self.DENIED, b"$1\r\nv\r\n"])
        with Client(path, timeout=10) as kv:
            with kv.pipeline() as p:
                p.put("ok", "k", "v").put("config", "k", "v").get("ok", "k")
                results = p.execute(raise_on_error=False)
            self.assertEqual(results[0], True)
            self.assertIsInstance(results[1], PermissionDeniedError)
            self.assertEqual(results[2], b"v")
            self.assertTrue(kv.connected)
            self.assertEqual(kv.ping(), "PONG")  # on the same connection: the server has one
        self.assertEqual(requests[3], [b"PING"])

    def test_a_commands_noperm_raises_permission_denied_and_the_next_call_goes_on(self):
        path, requests, _ = pipeline_server(self, "perm1", [self.DENIED])
        with Client(path, timeout=10) as kv:
            with self.assertRaises(PermissionDeniedError) as caught:
                kv.put("config", "k", "v")
            self.assertEqual(caught.exception.message,
                             "no write permission on namespace 'config' for uid 33")
            self.assertTrue(kv.connected)
            self.assertEqual(kv.ping(), "PONG")

    def test_a_connection_refused_on_accept_still_closes_it(self):
        path, requests, _ = pipeline_server(self, "refused", [self.REFUSED])
        kv = Client(path, timeout=10)
        self.addCleanup(kv.close)
        with kv.pipeline() as p:
            p.ping().ping()
            results = p.execute(raise_on_error=False)
        self.assertEqual(type(results[0]), ConnectionRefusedByServer)
        self.assertEqual(results[0].code, "NOPERM")
        self.assertIsInstance(results[1], ActorKVConnectionError)
        self.assertFalse(kv.connected)

    def test_a_feed_cut_off_with_noperm_ends_with_it_and_does_not_resume(self):
        path, requests, _ = scripted_server(self, "cutoff", [
            push("changes", "cfg", 5) + push("change", "cfg", 6, ["a", "1"])
            + b"-NOPERM no read permission on namespace 'cfg' for uid 0\r\n",
        ])
        feed = actorkv.ChangeFeed(path, "cfg", timeout=10)
        self.addCleanup(feed.close)
        self.assertEqual(take(feed, 1), [Change("cfg", 6, [(b"a", b"1")])])
        with self.assertRaises(PermissionDeniedError) as caught:
            feed.next_event(PATIENCE)
        self.assertEqual(caught.exception.message, "no read permission on namespace 'cfg' for uid 0")
        self.assertTrue(feed.closed)
        self.assertEqual(feed.reconnects, 0)
        self.assertEqual(requests, [[b"CHANGES", b"cfg"]])

    def test_a_feed_whose_resume_is_refused_with_noperm_ends_with_it(self):
        # The connection is lost (the server restarted, say); the new server's rules do not
        # let this client read the namespace.
        path, requests, _ = scripted_server(self, "resume", [
            push("changes", "cfg", 5) + push("change", "cfg", 6, ["a", "1"]),
            b"-NOPERM no read permission on namespace 'cfg' for uid 0\r\n",
        ])
        feed = actorkv.ChangeFeed(path, "cfg", timeout=10)
        self.addCleanup(feed.close)
        self.assertEqual(take(feed, 1), [Change("cfg", 6, [(b"a", b"1")])])
        with self.assertRaises(PermissionDeniedError):
            feed.next_event(PATIENCE)
        self.assertTrue(feed.closed)
        self.assertEqual(requests, [[b"CHANGES", b"cfg"], [b"CHANGES", b"cfg", b"FROM", b"6"]])


ACL_RULES = """# uid 0 is this test process; the server runs as 65534
uid:0  readable  read
uid:0  writable  read write
"""


@unittest.skipUnless(CAN_RUN_AS_NOBODY, NEEDS_ROOT)
class PermissionTests(unittest.TestCase):
    """A real server with --acl, run as nobody, so that this process (root) is an ordinary
    client of it."""

    def setUp(self):
        require_server()

    def start(self, rules=ACL_RULES, *flags):
        server = ServerProcess("--socket-mode", "666", "--acl", "PLACEHOLDER", *flags, as_nobody=True)
        self.addCleanup(server.cleanup)
        server.acl = os.path.join(server.dir, "acl.conf")
        server.flags[server.flags.index("PLACEHOLDER")] = server.acl
        self.write_rules(server, rules)
        return server.start()

    def write_rules(self, server, rules):
        temporary = server.acl + ".new"
        with open(temporary, "w") as f:
            f.write(rules)
        os.chmod(temporary, 0o644)
        os.rename(temporary, server.acl)

    def reload(self, server, rules):
        """Rewrites the rules and sends SIGHUP; returns once the server logs the reload."""
        before = server.log().count("reloaded")
        self.write_rules(server, rules)
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + PATIENCE
        while server.log().count("reloaded") == before:
            if time.monotonic() > deadline:
                raise AssertionError("no reload logged after SIGHUP:\n" + server.log())
            time.sleep(0.01)

    def test_a_commands_noperm_leaves_the_connection_usable(self):
        server = self.start()
        with server.client() as kv:
            with self.assertRaises(PermissionDeniedError) as caught:
                kv.put("readable", "k", "v")  # the connection's first reply
            self.assertEqual(caught.exception.code, "NOPERM")
            self.assertEqual(caught.exception.message,
                             "no write permission on namespace 'readable' for uid 0")
            self.assertTrue(kv.connected)
            ident = kv.execute_command("CLIENT", "ID")
            self.assertIsNone(kv.get("readable", "k"), "nothing applied")
            with self.assertRaises(PermissionDeniedError):
                kv.get("other", "k")
            with self.assertRaises(PermissionDeniedError):
                kv.compact("writable")
            with self.assertRaises(PermissionDeniedError) as caught:
                kv.execute_command("ACL", "LOAD")
            self.assertEqual(caught.exception.message, "only the server's own uid %d may run "
                             "ACL LOAD; this connection is uid 0" % NOBODY)
            with self.assertRaises(ServerError) as caught:
                kv.get("a/b", "k")
            self.assertNotIsInstance(caught.exception, PermissionDeniedError)
            kv.put("writable", "k", "v")
            self.assertEqual(kv.execute_command("CLIENT", "ID"), ident, "one connection throughout")

    def test_a_pipeline_gets_every_reply_around_a_noperm(self):
        server = self.start()
        with server.client() as kv:
            ident = kv.execute_command("CLIENT", "ID")
            with kv.pipeline() as p:
                p.put("writable", "a", "1").put("readable", "a", "1").get("writable", "a")
                p.count("other").incr("writable", "n", 5)
                results = p.execute(raise_on_error=False)
            self.assertEqual(results[0], True)
            self.assertIsInstance(results[1], PermissionDeniedError)
            self.assertEqual(results[2], b"1")
            self.assertIsInstance(results[3], PermissionDeniedError)
            self.assertEqual(results[4], 5)
            with kv.pipeline() as p:
                p.put("readable", "a", "1").put("writable", "b", "2")
                with self.assertRaises(PermissionDeniedError):
                    p.execute()
            self.assertEqual(kv.get("writable", "b"), b"2", "the write after the refused one ran")
            self.assertEqual(kv.execute_command("CLIENT", "ID"), ident)

    def test_changes_without_the_read_right_raise_at_once(self):
        server = self.start()
        with server.client() as kv:
            for kwargs in ({}, {"snapshot": True}, {"from_seq": 0}):
                with self.assertRaises(PermissionDeniedError, msg=kwargs) as caught:
                    kv.changes("other", **kwargs)
                self.assertEqual(caught.exception.message,
                                 "no read permission on namespace 'other' for uid 0")
            with self.assertRaises(PermissionDeniedError):
                kv.mirror("other")

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_a_feed_cut_off_by_a_reload_ends_with_permission_denied(self):
        server = self.start(ACL_RULES + "uid:0 feed read write\n")
        with server.client() as kv:
            kv.put("feed", "k", "1")
            with kv.changes("feed", from_seq=0) as feed:
                self.assertEqual(take(feed, 2), [Change("feed", 1, [(b"k", b"1")]), Synced("feed", 1)])
                self.reload(server, ACL_RULES)
                with self.assertRaises(PermissionDeniedError) as caught:
                    take(feed, 1)
                self.assertEqual(caught.exception.message,
                                 "no read permission on namespace 'feed' for uid 0")
                self.assertTrue(feed.closed)
                self.assertEqual(feed.reconnects, 0)
            with self.assertRaises(PermissionDeniedError):
                kv.get("feed", "k")
            self.assertIsNone(kv.get("writable", "k"))

    def test_a_lock_without_the_write_right_raises_at_once(self):
        server = self.start()
        with server.client() as kv:
            lock = kv.lock("readable", "job")  # timeout None: would wait for ever
            with self.assertRaises(PermissionDeniedError):
                lock.acquire()
            self.assertFalse(lock.locked)

    def test_a_connection_refused_on_accept_is_not_permission_denied(self):
        server = self.start(ACL_RULES, "--allow-uid", "4242")
        kv = server.client()
        self.addCleanup(kv.close)
        with self.assertRaises(ServerError) as caught:
            kv.ping()
        self.assertNotIsInstance(caught.exception, PermissionDeniedError)
        self.assertIsInstance(caught.exception, ConnectionRefusedByServer)
        self.assertIsInstance(caught.exception, ActorKVConnectionError)
        self.assertEqual((caught.exception.code, caught.exception.message),
                         ("NOPERM", "connection refused: uid 0 gid 0 is not allowed to connect"))
        self.assertFalse(kv.connected)


class ChangesTests(ServerTestCase):
    """CHANGES against a real server."""

    fsync = "always"

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_watcher_sees_every_acknowledged_write_once_in_order(self):
        """Four writers (threads, each its own connection) write puts, incrs, deletes of
        existing keys and batches; the watcher sees exactly those writes, each batch as one
        change, numbered without gap or duplicate, each writer's in its order."""
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        start = feed.start_seq
        self.assertEqual(start, 0)  # a namespace never written: its first change is 1
        writers, rounds = 4, 30
        expected = [[] for _ in range(writers)]  # per writer: the items of each write, in order
        versions = {}  # (writer, round) -> version a conditional put returned
        failures = []

        def write(w):
            try:
                with self.server.client() as kv:
                    for i in range(rounds):
                        key = "w%d:k%03d" % (w, i)
                        kv.put(self.ns, key, "v%d" % i)
                        expected[w].append([(key.encode(), b"v%d" % i)])
                        value = kv.incr(self.ns, "w%d:count" % w, i)
                        expected[w].append([(b"w%d:count" % w, str(value).encode())])
                        if i % 3 == 2:
                            self.assertEqual(kv.delete(self.ns, key), 1)
                            expected[w].append([(key.encode(), None)])
                        if i % 5 == 4:
                            kv.batch(self.ns, [("put", key + "a", "A"), ("del", "w%d:k000" % w),
                                               ("incr", "w%d:count" % w, 1),
                                               ("put", key + "b", b"")])
                            expected[w].append([((key + "a").encode(), b"A"),
                                                (b"w%d:k000" % w, None),
                                                (b"w%d:count" % w, str(value + 1).encode()),
                                                ((key + "b").encode(), b"")])
                            kv.put(self.ns, "w%d:k000" % w, "back")
                            expected[w].append([(b"w%d:k000" % w, b"back")])
                        if i % 7 == 0:
                            version = kv.put(self.ns, key + "c", "C", if_version=0)
                            versions[(w, i)] = version
                            expected[w].append([((key + "c").encode(), b"C")])
            except BaseException as error:  # pragma: no cover - reported below
                failures.append(error)

        threads = [threading.Thread(target=write, args=(w,), daemon=True)
                   for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE)
        self.assertFalse(failures, failures)
        total = sum(len(items) for items in expected)
        events = take(feed, total + 1)  # the changes and the one synced, in any interleaving
        synced = [event for event in events if isinstance(event, Synced)]
        changes = [event for event in events if isinstance(event, Change)]
        self.assertEqual(len(synced), 1, synced)
        self.assertEqual([change.seq for change in changes], list(range(start + 1, start + 1 + total)))
        self.assertTrue(all(change.namespace == self.ns for change in changes))
        seen = [[] for _ in range(writers)]
        by_seq = {}
        for change in changes:
            writer = {key.split(b":")[0] for key, _ in change.items}
            self.assertEqual(len(writer), 1, change)  # one write's keys: one writer's
            seen[int(writer.pop()[1:])].append(change.items)
            by_seq[change.seq] = change
        for w in range(writers):
            self.assertEqual(seen[w], expected[w], "writer %d" % w)
        for (w, i), version in versions.items():  # a version is its change's sequence
            self.assertEqual(by_seq[version].items, [(b"w%d:k%03d" % (w, i) + b"c", b"C")])
        self.assertEqual(last_sequence(self.kv, self.ns), start + total)
        self.assertIsNone(feed.next_event(0.3))  # nothing more, nothing twice
        self.assertEqual(feed.reconnects, 0)

    def test_prefix_filters_keys_and_changes(self):
        self.kv.put(self.ns, "a:before", "x")
        with self.kv.changes(self.ns, prefix="a:") as feed:
            self.assertEqual(feed.prefix, b"a:")
            start = feed.start_seq
            self.assertEqual(start, last_sequence(self.kv, self.ns))
            self.assertEqual(feed.next_event(PATIENCE), Synced(self.ns, start))
            self.kv.put(self.ns, "b:1", "no")                                # start + 1
            self.kv.put(self.ns, "a:1", "yes")                               # start + 2
            self.kv.batch(self.ns, [("put", "b:2", "no"), ("put", "a:2", "yes"),
                                    ("del", "a:before"), ("put", "a", "no")])  # start + 3
            self.kv.batch(self.ns, [("put", "b:3", "no"), ("del", "b:1")])    # start + 4
            self.kv.incr(self.ns, "a:n", 5)                                  # start + 5
            self.kv.put(self.ns, "ab", "no")                                 # start + 6
            # Each write's sequence is its key's version: start + 2, 3, 5 and 6 locally. Through
            # an agent, sequences are the etcd cluster's revisions, which a write elsewhere (a
            # lease expiring from an earlier test) may take in between (protocol.md, Cluster mode).
            written = {key: self.kv.getv(self.ns, key)[1] for key in ("a:1", "a:2", "a:n", "ab")}
            if ETCD is None:
                self.assertEqual(written, {"a:1": start + 2, "a:2": start + 3, "a:n": start + 5, "ab": start + 6})
            self.assertEqual(take(feed, 3), [
                Change(self.ns, written["a:1"], [(b"a:1", b"yes")]),
                Change(self.ns, written["a:2"], [(b"a:2", b"yes"), (b"a:before", None)]),
                Change(self.ns, written["a:n"], [(b"a:n", b"5")]),
            ])
            self.assertIsNone(feed.next_event(0.3))
        # A snapshot under a prefix, and a resume point passed over by filtered changes.
        with self.kv.changes(self.ns, prefix=b"a:", snapshot=True) as feed:
            snapshot, synced = take(feed, 2)
            at = written["ab"] if ETCD is None else max(written["ab"], snapshot.seq)
            self.assertEqual(snapshot, Snapshot(self.ns, at, [
                (b"a:1", b"yes"), (b"a:2", b"yes"), (b"a:n", b"5")]))
            self.assertEqual(synced, Synced(self.ns, at))

    def test_snapshot_then_changes_mirror_equals_scan(self):
        """A mirror (CHANGES SNAPSHOT) of a namespace with more keys than one snapshot
        message holds, kept current through puts, deletes, incrs and batches, equals the
        namespace read back with SCAN; a prefixed mirror equals a prefixed SCAN."""
        with self.kv.pipeline() as p:
            for i in range(2500):
                p.put(self.ns, "k%05d" % i, "v%d" % i)
            p.execute()
        mirror = self.kv.mirror(self.ns)
        self.addCleanup(mirror.close)
        prefixed = self.kv.mirror(self.ns, prefix="k010")
        self.addCleanup(prefixed.close)
        for m in (mirror, prefixed):
            self.assertTrue(m.synced)
            self.assertEqual(m.seq, last_sequence(self.kv, self.ns))
        self.assertEqual(mirror.data, dict(self.kv.scan(self.ns)))
        self.assertEqual(len(mirror.data), 2500)
        self.assertEqual(prefixed.data, dict(self.kv.scan(self.ns, prefix="k010")))
        self.assertEqual(len(prefixed.data), 100)
        for i in range(0, 2500, 7):
            self.kv.delete(self.ns, "k%05d" % i)
        for i in range(0, 2500, 11):
            self.kv.batch(self.ns, [("put", "k%05d" % i, "new%d" % i), ("incr", "n", i),
                                    ("del", "k%05d" % (i + 1))])
        self.kv.put(self.ns, "k010xx", "added")
        last = self.kv.put(self.ns, "k010zz", "last", if_version=0)
        for m in (mirror, prefixed):
            while m.seq < last:
                self.assertIsNotNone(m.next_event(PATIENCE), "no change came")
            self.assertEqual(m.seq, last)
            self.assertEqual(m.poll(), 0)
        self.assertEqual(mirror.data, dict(self.kv.scan(self.ns)))
        self.assertEqual(prefixed.data, dict(self.kv.scan(self.ns, prefix="k010")))
        self.assertEqual(prefixed.data[b"k010zz"], b"last")

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_snapshot_of_a_namespace_never_written(self):
        with self.kv.changes(self.ns, snapshot=True) as feed:
            self.assertEqual(take(feed, 2), [Snapshot(self.ns, 0, []), Synced(self.ns, 0)])
            self.kv.put(self.ns, "k", "v")
            self.assertEqual(feed.next_event(PATIENCE), Change(self.ns, 1, [(b"k", b"v")]))

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_from_seq_replays_history(self):
        for i in range(10):
            self.kv.put(self.ns, "k", str(i))
        with self.kv.changes(self.ns, from_seq=4) as feed:
            events = take(feed, 7)
        self.assertEqual(events, [Change(self.ns, seq, [(b"k", str(seq - 1).encode())])
                                  for seq in range(5, 11)] + [Synced(self.ns, 10)])
        with self.kv.changes(self.ns, from_seq=10) as feed:
            self.assertEqual(feed.next_event(PATIENCE), Synced(self.ns, 10))

    def test_bad_from_raises_server_error_and_client_stays_usable(self):
        self.kv.put(self.ns, "k", "v")
        last = last_sequence(self.kv, self.ns)
        with self.assertRaises(ServerError) as caught:
            self.kv.changes(self.ns, from_seq=last + 5)
        self.assertEqual(caught.exception.code, "ERR")
        self.assertNotIsInstance(caught.exception, CompactedError)
        self.assertIn("after the last sequence", caught.exception.message)
        with self.assertRaises(ServerError) as caught:
            self.kv.changes("bad/name")
        self.assertEqual(caught.exception.code, "BADNS")
        # The same refusals on this client's own connection leave it as it was.
        for args in (["FROM", "x"], ["FROM", str(last), "SNAPSHOT"], ["BOGUS"], ["FROM"]):
            with self.assertRaises(ServerError, msg=args) as caught:
                self.kv.execute_command("CHANGES", self.ns, *args)
            self.assertEqual(caught.exception.code, "ERR", args)
        self.assertEqual(self.kv.get(self.ns, "k"), b"v")
        self.kv.put(self.ns, "k", "w")
        with self.kv.changes(self.ns, from_seq=last) as feed:
            self.assertEqual(take(feed, 2), [Change(self.ns, last + 1, [(b"k", b"w")]),
                                             Synced(self.ns, last + 1)])

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_close_ends_the_iteration_and_the_connection(self):
        before = self.kv.info_dict()["connected_clients"]
        feed = self.kv.changes(self.ns)
        self.assertEqual(self.kv.info_dict()["connected_clients"], before + 1)
        events = []

        def follow():
            for event in feed:
                events.append(event)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()

        def wait_for(count):
            deadline = time.monotonic() + PATIENCE
            while len(events) < count and time.monotonic() < deadline:
                time.sleep(0.01)

        wait_for(1)  # synced, then a change
        self.kv.put(self.ns, "k", "v")
        wait_for(2)
        feed.close()  # from another thread than the one iterating
        thread.join(PATIENCE)
        self.assertFalse(thread.is_alive(), "close() did not end the iteration")
        self.assertEqual(events, [Synced(self.ns, 0), Change(self.ns, 1, [(b"k", b"v")])])
        self.assertIsNone(feed.next_event(0))
        deadline = time.monotonic() + PATIENCE
        while self.kv.info_dict()["connected_clients"] != before:
            self.assertLess(time.monotonic(), deadline, "the feed's connection stayed open")
            time.sleep(0.05)
        with self.kv.mirror(self.ns) as mirror:
            self.assertEqual(mirror.data, {b"k": b"v"})
        self.assertTrue(mirror.feed.closed)

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace (the example prints them)")
    def test_watch_config_example(self):
        """Clients/examples/watch_config.py: the mirror's keys, then each change; with
        --from, the changes after a sequence."""
        script = os.path.join(REPO_ROOT, "Clients", "examples", "watch_config.py")
        self.kv.put(self.ns, "theme", "dark")
        self.kv.put(self.ns, "motd", "hello")
        watcher = subprocess.Popen(
            [sys.executable, script, "--socket", self.server.socket, "--namespace", self.ns,
             "--exit-after", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(watcher.kill)
        lines = [watcher.stdout.readline() for _ in range(3)]
        self.assertEqual(lines, [b"synced at 2: 2 keys\n", b"  motd = 'hello'\n",
                                 b"  theme = 'dark'\n"])
        self.kv.batch(self.ns, [("put", "theme", "light"), ("del", "motd")])
        self.kv.put(self.ns, "new", "1")
        out, err = watcher.communicate(timeout=PATIENCE)
        self.assertEqual(watcher.returncode, 0, err)
        self.assertEqual(out, b"3  theme = 'light'\n3  motd deleted\n4  new = '1'\n")
        run = subprocess.run(
            [sys.executable, script, "--socket", self.server.socket, "--namespace", self.ns,
             "--from", "2", "--exit-after", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=PATIENCE)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout, b"3  theme = 'light'\n3  motd deleted\n4  new = '1'\n")


class ChangesRestartTests(unittest.TestCase):
    """Change feeds across server restarts and compactions: each test runs its own server."""

    def setUp(self):
        require_server()

    def start(self, server):
        self.addCleanup(server.cleanup)
        return server.start()

    @staticmethod
    def restart(server, kill=True):
        """Stops the server (SIGKILL, or SIGTERM) and starts it again on the same data
        directory and socket."""
        if kill:
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(PATIENCE)
        else:
            assert server.stop() == 0, server.log()
        server.start()

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_resume_after_kill_9(self):
        """The feed is not reading when the server is killed: it delivers what it had
        received, then resumes on the restarted server FROM the last change it delivered
        and continues with the next sequence: nothing missed, nothing twice."""
        server = self.start(ServerProcess(fsync="always"))
        kv = server.client()
        self.addCleanup(kv.close)
        feed = kv.changes("feed")
        self.addCleanup(feed.close)
        for i in range(1, 11):
            kv.put("feed", "k%02d" % i, "before")
        self.assertEqual([e.seq for e in take(feed, 10, Change)], list(range(1, 11)))
        for i in range(11, 16):
            kv.put("feed", "k%02d" % i, "unread")  # acknowledged, maybe not yet received
        self.restart(server)
        kv.close()
        for i in range(16, 21):
            kv.put("feed", "k%02d" % i, "after")
        changes = take(feed, 10, Change)
        self.assertEqual([c.seq for c in changes], list(range(11, 21)))
        self.assertEqual([c.items for c in changes],
                         [[(b"k%02d" % i, b"unread" if i < 16 else b"after")]
                          for i in range(11, 21)])
        self.assertEqual(feed.reconnects, 1)
        self.assertEqual(rest(feed), [Synced("feed", 20)])  # caught up again; no duplicate

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_resume_while_waiting_across_a_restart(self):
        """A thread waits in the feed (and a mirror) while the server stops (SIGTERM) and
        then is killed again; the feed keeps trying to connect and resumes each time."""
        server = self.start(ServerProcess(fsync="always"))
        kv = server.client()
        self.addCleanup(kv.close)
        kv.put("feed", "seed", "0")
        feed = kv.changes("feed", from_seq=0, reconnect_timeout=PATIENCE)
        self.addCleanup(feed.close)
        mirror = kv.mirror("feed", reconnect_timeout=PATIENCE)
        self.addCleanup(mirror.close)
        events = []
        failures = []

        def follow():
            try:
                while len([e for e in events if isinstance(e, Change)]) < 31:
                    event = feed.next_event(PATIENCE)
                    if event is None:
                        break
                    events.append(event)
            except BaseException as error:  # pragma: no cover - reported below
                failures.append(error)

        def received():
            return len([e for e in events if isinstance(e, Change)])

        def synced():
            return len([e for e in events if isinstance(e, Synced)])

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        for round_, kill in enumerate((False, True, True)):
            for i in range(10):
                kv.put("feed", "r%d" % round_, str(i))
            deadline = time.monotonic() + PATIENCE
            # The thread got this round's changes (after resuming), and, after the first restart,
            # the feed's Synced of its resumed stream (else the next kill may come before it).
            while (received() < 11 + 10 * round_ or (round_ == 1 and synced() < 2)) and time.monotonic() < deadline:
                time.sleep(0.01)
            server.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            server.process.wait(PATIENCE)
            kv.close()
            time.sleep(0.5)  # the feed finds no server for a while
            server.start()
        thread.join(PATIENCE)
        self.assertFalse(failures, failures)
        changes = [e for e in events if isinstance(e, Change)]
        self.assertEqual([c.seq for c in changes], list(range(1, 32)))
        self.assertEqual(feed.reconnects, 2)  # the last restart came after the 31st change
        self.assertGreaterEqual(len([e for e in events if isinstance(e, Synced)]), 2)
        mirror.poll()
        while mirror.seq < 31:
            self.assertIsNotNone(mirror.next_event(PATIENCE))
        self.assertEqual(mirror.data, dict(kv.scan("feed")))
        self.assertEqual(mirror.data[b"r2"], b"9")

    @local_only("a follower is held back by etcd, never dropped for lagging, until etcd compacts")
    def test_lagging_follower_resumes(self):
        """A feed that does not read while 6 MB of changes are written is dropped by the
        server (-LAGGING); reading again, it resumes FROM the last change it got and
        delivers every change once."""
        server = self.start(ServerProcess("--max-output-bytes", "65536",
                                          "--changes-lag-bytes", "65536"))
        kv = server.client()
        self.addCleanup(kv.close)
        feed = kv.changes("lag")
        self.addCleanup(feed.close)
        value = b"x" * 10000
        with kv.pipeline() as p:
            for i in range(600):
                p.put("lag", "k%d" % (i % 10), value + b"%d" % i)
            p.execute()
        changes = take(feed, 600, Change)
        self.assertEqual([c.seq for c in changes], list(range(1, 601)))
        self.assertEqual([c.items for c in changes],
                         [[(b"k%d" % (i % 10), value + b"%d" % i)] for i in range(600)])
        self.assertGreaterEqual(feed.reconnects, 1, "the server never dropped the feed")
        self.assertEqual([e for e in rest(feed) if isinstance(e, Change)], [])

    def compact_away(self, kv, ns, count):
        """Writes ``count`` changes twice, compacting after each, so that with
        ``--changes-history 1`` the first ones are no longer held."""
        for round_ in range(2):
            with kv.pipeline() as p:
                for i in range(count):
                    p.put(ns, "k%d" % (i % 7), "r%d-%d" % (round_, i))
                p.execute()
            kv.compact(ns)

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace; COMPACT compacts the whole cluster's history")
    def test_compacted(self):
        server = self.start(ServerProcess("--changes-history", "1", fsync="always"))
        kv = server.client()
        self.addCleanup(kv.close)
        kv.put("c", "k", "first")
        feed = kv.changes("c", from_seq=0)
        self.addCleanup(feed.close)
        mirror = kv.mirror("c")
        self.addCleanup(mirror.close)
        self.assertEqual(take(feed, 2), [Change("c", 1, [(b"k", b"first")]), Synced("c", 1)])
        self.assertEqual(mirror.data, {b"k": b"first"})
        # The server restarts, then many changes are written and compacted away before the
        # feed and the mirror resume.
        self.restart(server, kill=False)
        kv.close()
        self.compact_away(kv, "c", 50)
        last = last_sequence(kv, "c")
        self.assertEqual(last, 101)
        oldest = kv.info_dict()["ns_c"].get("oldest_sequence")
        with self.assertRaises(CompactedError) as caught:
            feed.next_event(PATIENCE)
        self.assertEqual(caught.exception.code, "COMPACTED")
        self.assertIsInstance(caught.exception.oldest, int)
        self.assertGreater(caught.exception.oldest, 2)
        if oldest is not None:
            self.assertEqual(caught.exception.oldest, oldest)
        self.assertTrue(feed.closed)
        # At once, too: a FROM older than the history held.
        with self.assertRaises(CompactedError):
            kv.changes("c", from_seq=1)
        self.assertEqual(kv.get("c", "k"), b"first")  # this client is still usable
        # The mirror takes a new snapshot instead, and ends with the namespace's state.
        self.assertTrue(mirror.wait_synced(PATIENCE) and mirror.seq is not None)
        while mirror.seq < last:
            self.assertIsNotNone(mirror.next_event(PATIENCE))
        self.assertEqual(mirror.data, dict(kv.scan("c")))
        self.assertEqual(mirror.feed.reconnects, 1)
        kv.put("c", "k", "latest")
        while mirror.seq < last + 1:
            self.assertIsNotNone(mirror.next_event(PATIENCE))
        self.assertEqual(mirror.data[b"k"], b"latest")


# ============================================================================================
# Expiry (PX, PEXPIRE, PERSIST, PTTL), ephemeral keys and locks


#: A child process that holds an ephemeral key (and writes a plain one next to it), or a
#: lock, and prints "held" (or the lock's token); then it waits until it is killed or its
#: stdin closes.
HOLDER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from actorkv import Client
socket_path, namespace, key, mode = sys.argv[2:6]
kv = Client(socket_path, timeout=60)
if mode == "ephemeral":
    kv.put(namespace, key, "child-%d" % os.getpid(), ephemeral=True)
    kv.put(namespace, key + ".plain", "stays")
    print("held", flush=True)
else:
    lock = kv.lock(namespace, key, timeout=60)  # held while this reference lives
    print(lock.acquire(), flush=True)
sys.stdin.readline()
"""

#: A worker that, ``rounds`` times, takes the lock and under it reads a count from a plain
#: file, waits a little (so that without the lock other workers would read the same count)
#: and writes the count + 1; it appends each hold's token and its pid to another file.
LOCK_WORKER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from actorkv import Client
socket_path, namespace, key, counter, tokens, rounds = sys.argv[2:8]
with Client(socket_path, timeout=60) as kv:
    kv.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(int(rounds)):
        with kv.lock(namespace, key, timeout=120) as lock:
            with open(counter) as f:
                count = int(f.read())
            time.sleep(0.002)
            with open(counter, "w") as f:
                f.write(str(count + 1))
            with open(tokens, "a") as f:
                f.write("%d %d\n" % (lock.token, os.getpid()))
print("done", flush=True)
"""


def spawn(test, script, *args):
    """Starts ``python3 -c script <client dir> args...`` with pipes; killed at cleanup."""
    client_dir = os.path.dirname(os.path.abspath(actorkv.__file__))
    child = subprocess.Popen([sys.executable, "-c", script, client_dir] + [str(a) for a in args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)

    def cleanup():
        if child.poll() is None:
            child.kill()
        child.wait(PATIENCE)
        for stream in (child.stdin, child.stdout, child.stderr):
            stream.close()

    test.addCleanup(cleanup)
    return child


def read_line(child):
    """The child's next line of output (stripped); fails with its stderr if it exited."""
    line = child.stdout.readline()
    if not line:
        child.wait(PATIENCE)
        raise AssertionError("the child exited with %s: %s" % (
            child.returncode, child.stderr.read().decode("utf-8", "replace")))
    return line.decode("ascii").strip()


def wait_deleted(feed, key, timeout=PATIENCE):
    """Reads ``feed`` until a change deletes ``key``; returns that change. Fails if none
    comes within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("no delete of %r within %g s; events: %r" % (key, timeout, seen))
        event = feed.next_event(remaining)
        if event is None:
            continue
        seen.append(event)
        if isinstance(event, Change) and (key, None) in event.items:
            return event


def wait_until(condition, what, timeout=PATIENCE):
    """Polls ``condition()`` (a test's own check, not the client's) until it is true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting until " + what)
        time.sleep(0.02)


def followers(kv, ns):
    """How many change feeds follow namespace ``ns`` (INFO); in cluster mode, how many the agent
    serves in all (its INFO has no namespace lines)."""
    info = kv.info_dict()
    if ETCD is not None:
        return int(info["changes_followers"])
    return (info.get("ns_" + ns) or {}).get("followers", 0)


class ExpiryArgumentTests(unittest.TestCase):
    """What put(ttl=, ephemeral=), pexpire, persist, pttl and lock send, and the arguments they
    refuse before sending anything (no server: sending would raise ActorKVConnectionError)."""

    def test_put_options_as_sent(self):
        p = Client("/nonexistent/actorkv.sock", connect=False).pipeline()
        p.put("ns", "k", "v", ttl=1.5, ephemeral=True, if_version=0)
        p.put("ns", "k", "v", ttl=2)
        p.put("ns", "k", "v", ttl=0.0001)   # rounded up to the least PX takes
        p.put("ns", "k", "v", ttl=0.0123456)
        p.put("ns", "k", "v", 7, ttl=60)    # if_version stays the fourth positional argument
        p.put("ns", "k", "v", ephemeral=True)
        p.put("ns", "k", "v", ttl=None, ephemeral=False)
        p.pexpire("ns", "k", 2500).pexpire("ns", "k", -1).persist("ns", "k").pttl("ns", "k")
        self.assertEqual([payload for _, payload in p._queue], [
            encode_command("PUT", "ns", "k", "v", "PX", "1500", "EPHEMERAL", "IFVERSION", "0"),
            encode_command("PUT", "ns", "k", "v", "PX", "2000"),
            encode_command("PUT", "ns", "k", "v", "PX", "1"),
            encode_command("PUT", "ns", "k", "v", "PX", "12"),
            encode_command("PUT", "ns", "k", "v", "PX", "60000", "IFVERSION", "7"),
            encode_command("PUT", "ns", "k", "v", "EPHEMERAL"),
            encode_command("PUT", "ns", "k", "v"),
            encode_command("PEXPIRE", "ns", "k", "2500"),
            encode_command("PEXPIRE", "ns", "k", "-1"),
            encode_command("PERSIST", "ns", "k"),
            encode_command("PTTL", "ns", "k"),
        ])

    def test_arguments_checked_before_sending(self):
        client = Client("/nonexistent/actorkv.sock", connect=False)
        type_errors = [
            lambda: client.put("ns", "k", "v", ttl="5"),
            lambda: client.put("ns", "k", "v", ttl=True),
            lambda: client.put("ns", "k", "v", ttl=[1]),
            lambda: client.pexpire("ns", "k", 1.5),
            lambda: client.pexpire("ns", "k", "100"),
            lambda: client.pexpire("ns", "k", True),
            lambda: client.pexpire("ns", "k", None),
            lambda: client.lock("ns", "k", timeout="10"),
            lambda: client.lock("ns", "k", timeout=True),
            lambda: client.lock("ns", "k", ttl="10"),
            lambda: client.lock("ns", None),
            lambda: client.lock("ns", "k").acquire(timeout="1"),
        ]
        value_errors = [
            lambda: client.put("ns", "k", "v", ttl=0),
            lambda: client.put("ns", "k", "v", ttl=0.0),
            lambda: client.put("ns", "k", "v", ttl=-1),
            lambda: client.put("ns", "k", "v", ttl=-0.5),
            lambda: client.put("ns", "k", "v", ttl=float("nan")),
            lambda: client.put("ns", "k", "v", ttl=float("inf")),
            lambda: client.put("ns", "k", "v", ttl=1e300),
            lambda: client.put("ns", "k", "v", ttl=1 << 63),
            lambda: client.put("ns", "k", "v", ttl=0, if_version=0),
            lambda: client.pexpire("ns", "k", 1 << 63),
            lambda: client.pexpire("ns", "k", -(1 << 63) - 1),
            lambda: client.lock("ns", "k", ttl=0),
            lambda: client.lock("ns", "k", ttl=-3),
            lambda: client.lock("ns", "k", timeout=-1),
            lambda: client.lock("ns", "k", timeout=float("nan")),
            lambda: client.lock("ns", "k", timeout=float("inf")),
            lambda: client.lock("ns", ""),
            lambda: client.lock("ns", "k").acquire(timeout=-0.1),
        ]
        assert_refused_before_sending(self, client, type_errors, value_errors)
        p = client.pipeline()
        with self.assertRaises(ValueError):
            p.put("ns", "k", "v", ttl=-1)
        with self.assertRaises(TypeError):
            p.pexpire("ns", "k", 0.5)
        self.assertEqual(len(p), 0)  # nothing queued
        # Valid arguments get as far as the missing server.
        with self.assertRaises(ActorKVConnectionError):
            client.put("ns", "k", "v", ttl=0.0001, ephemeral=True)
        with self.assertRaises(ActorKVConnectionError):
            client.pexpire("ns", "k", -(1 << 63))
        with self.assertRaises(ActorKVConnectionError):
            client.lock("ns", "k", timeout=0, ttl=1).acquire()

    def test_lock_states_and_errors(self):
        self.assertTrue(issubclass(LockTimeout, ActorKVError))
        self.assertTrue(issubclass(LockTimeout, TimeoutError))
        self.assertFalse(issubclass(LockTimeout, ActorKVConnectionError))
        lock = Client("/nonexistent/actorkv.sock", connect=False).lock(
            "ns", "job", timeout=2.5, ttl=30, owner="me")
        self.assertIsInstance(lock, Lock)
        self.assertEqual((lock.namespace, lock.key, lock.owner, lock.timeout, lock.ttl),
                         ("ns", b"job", b"me", 2.5, 30))
        self.assertIsNone(lock.token)
        self.assertFalse(lock.locked)
        with self.assertRaises(RuntimeError):
            lock.release()  # not held
        with self.assertRaises(ActorKVConnectionError):
            with lock:
                self.fail("the body ran without the lock")
        self.assertFalse(lock.locked)
        error = LockTimeout("ns", b"job", 2.5)
        self.assertEqual((error.namespace, error.key, error.timeout), ("ns", b"job", 2.5))
        self.assertIn("2.5", str(error))


class ChangesAfterRemovalTests(ServerTestCase):
    """CHANGES FROM 0 on a server of its own: its removal raises the sequence floor, which
    would number the other tests' new namespaces after it."""

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_from_zero_after_a_removal_replays_the_new_life(self):
        old = self.ns + "-old"
        self.kv.put(old, "k", "v")
        self.assertEqual(self.kv.unlink(old), 1)
        self.kv.put(self.ns, "a", "1")
        self.kv.put(self.ns, "b", "2")
        last = last_sequence(self.kv, self.ns)
        with self.kv.changes(self.ns, from_seq=0) as feed:
            events = take(feed, 3)
            self.assertEqual(feed.start_seq, last - 2)
        self.assertEqual(events, [Change(self.ns, last - 1, [(b"a", b"1")]),
                                  Change(self.ns, last, [(b"b", b"2")]), Synced(self.ns, last)])


class ExpiryTests(ServerTestCase):
    """Keys with a deadline: put(ttl=...), pexpire, persist, pttl on a real server."""

    def test_expired_key_is_gone_for_every_read_and_deleted_for_watchers(self):
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        self.kv.put(self.ns, "plain", "p")
        self.assertTrue(self.kv.put(self.ns, "short", "v", ttl=0.2))
        wait_until(lambda: self.kv.get(self.ns, "short") is None, "the key expired")
        # Gone for every read at once, whether or not its logged delete has happened yet.
        self.assertEqual(self.kv.pttl(self.ns, "short"), -2)
        self.assertIsNone(self.kv.getv(self.ns, "short"))
        self.assertEqual(self.kv.exists(self.ns, "short", "plain"), 1)
        self.assertEqual(self.kv.count(self.ns), 1)
        self.assertEqual(list(self.kv.scan(self.ns)), [(b"plain", b"p")])
        with self.kv.mirror(self.ns) as mirror:  # CHANGES ... SNAPSHOT
            self.assertEqual(mirror.data, {b"plain": b"p"})
        # And removed by a logged delete that watchers see.
        change = wait_deleted(feed, b"short")
        self.assertEqual(change.items, [(b"short", None)])
        self.assertFalse(self.kv.persist(self.ns, "short"))
        self.assertFalse(self.kv.pexpire(self.ns, "short", 10000))

    def test_pttl_shows_the_deadline_in_milliseconds(self):
        self.assertEqual(self.kv.pttl(self.ns, "absent"), -2)
        self.kv.put(self.ns, "forever", "v")
        self.assertEqual(self.kv.pttl(self.ns, "forever"), -1)
        self.kv.put(self.ns, "seconds", "v", ttl=30)
        assert_pttl(self, self.kv.pttl(self.ns, "seconds"), 20000, 30000)
        self.kv.put(self.ns, "fraction", "v", ttl=1000.25)  # sent as PX 1000250
        assert_pttl(self, self.kv.pttl(self.ns, "fraction"), 990000, 1000250)
        self.kv.put(self.ns, "short", "v", ttl=1.5)         # PX 1500, not EX 2
        self.assertLessEqual(self.kv.pttl(self.ns, "short"), 1500 + DEADLINE_SLACK_MS)
        self.assertNotEqual(self.kv.pttl(self.ns, "short"), -1)
        version = self.kv.put(self.ns, "guarded", "v", if_version=0, ttl=600)
        self.assertIsInstance(version, int)
        self.assertEqual(self.kv.getv(self.ns, "guarded"), (b"v", version))
        assert_pttl(self, self.kv.pttl(self.ns, "guarded"), 500000, 600000)
        self.assertIsNone(self.kv.put(self.ns, "guarded", "w", if_version=0, ttl=600))
        self.assertEqual(self.kv.get(self.ns, "guarded"), b"v")

    def test_put_without_ttl_removes_the_deadline(self):
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        self.kv.put(self.ns, "k", "first", ttl=0.2)
        self.kv.put(self.ns, "k", "second")
        self.assertEqual(self.kv.pttl(self.ns, "k"), -1)
        self.kv.put(self.ns, "later", "v", ttl=0.4)  # its deadline is after k's first one
        wait_deleted(feed, b"later")
        self.assertEqual(self.kv.get(self.ns, "k"), b"second")
        self.assertEqual(self.kv.pttl(self.ns, "k"), -1)

    def test_incr_keeps_the_deadline(self):
        """A rate limiter's window: incr, pexpire on the first count; later counts keep the
        deadline (as Redis's INCR keeps a TTL), so the counter still ends with its window."""
        self.assertEqual(self.kv.incr(self.ns, "hits"), 1)
        self.assertTrue(self.kv.pexpire(self.ns, "hits", 600000))
        self.assertEqual(self.kv.incr(self.ns, "hits", 4), 5)
        assert_pttl(self, self.kv.pttl(self.ns, "hits"), 500000, 600000)
        self.kv.put(self.ns, "hits", "0")  # a put replaces it, as always
        self.assertEqual(self.kv.incr(self.ns, "hits"), 1)
        self.assertEqual(self.kv.pttl(self.ns, "hits"), -1)

    @local_only("PEXPIRE and PERSIST write the key again: a new version, and a change")
    def test_pexpire_persist_pttl(self):
        self.assertFalse(self.kv.pexpire(self.ns, "k", 1000))
        self.assertFalse(self.kv.persist(self.ns, "k"))
        self.assertEqual(self.kv.pttl(self.ns, "k"), -2)
        version = self.kv.put(self.ns, "k", "v", if_version=0)
        self.assertFalse(self.kv.persist(self.ns, "k"))  # no deadline to remove
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        self.assertTrue(self.kv.pexpire(self.ns, "k", 600000))
        assert_pttl(self, self.kv.pttl(self.ns, "k"), 500000, 600000)
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"v", version))  # same value, version
        self.assertTrue(self.kv.persist(self.ns, "k"))
        self.assertEqual(self.kv.pttl(self.ns, "k"), -1)
        self.assertFalse(self.kv.persist(self.ns, "k"))
        self.assertEqual(self.kv.getv(self.ns, "k"), (b"v", version))
        # Neither was a change: the next one the watcher sees is this put.
        self.kv.put(self.ns, "marker", "m")
        self.assertEqual(take(feed, 1, Change)[0].items, [(b"marker", b"m")])
        # 0 or less deletes the key now, and that is a change.
        self.assertTrue(self.kv.pexpire(self.ns, "k", 0))
        self.assertIsNone(self.kv.get(self.ns, "k"))
        self.assertEqual(self.kv.pttl(self.ns, "k"), -2)
        self.assertEqual(take(feed, 1, Change)[0].items, [(b"k", None)])
        self.kv.put(self.ns, "k2", "v")
        self.assertTrue(self.kv.pexpire(self.ns, "k2", -5))
        self.assertEqual(self.kv.exists(self.ns, "k2"), 0)
        # A short pexpire makes the key expire like a ttl.
        self.kv.put(self.ns, "k3", "v")
        self.assertTrue(self.kv.pexpire(self.ns, "k3", 100))
        wait_deleted(feed, b"k3")
        self.assertIsNone(self.kv.get(self.ns, "k3"))

    @local_only("an agent of an etcd cluster refuses a whole namespace's deadline")
    def test_namespace_deadline(self):
        self.assertFalse(self.kv.pexpire_namespace(self.ns, 60000))  # no key: nothing done
        self.assertEqual(self.kv.pttl_namespace(self.ns), -2)
        self.kv.put(self.ns, "a", "1")
        self.assertEqual(self.kv.pttl_namespace(self.ns), -1)
        self.assertTrue(self.kv.pexpire_namespace(self.ns, 600000))
        assert_pttl(self, self.kv.pttl_namespace(self.ns), 500000, 600000)
        self.kv.put(self.ns, "b", "2")  # a write keeps it
        assert_pttl(self, self.kv.pttl_namespace(self.ns), 500000, 600000)
        self.assertEqual(self.kv.pttl(self.ns, "a"), -1, "a key's own deadline is another")
        self.assertTrue(self.kv.persist_namespace(self.ns))
        self.assertFalse(self.kv.persist_namespace(self.ns))
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        self.assertTrue(self.kv.pexpire_namespace(self.ns, 100))
        wait_deleted(feed, b"a")
        self.assertEqual((self.kv.count(self.ns), self.kv.pttl_namespace(self.ns)), (0, -2))
        self.kv.put(self.ns, "c", "3")
        self.assertEqual(self.kv.pttl_namespace(self.ns), -1, "a key written afterwards: no deadline")
        self.assertTrue(self.kv.pexpire_namespace(self.ns, 0))  # now: every key deleted
        self.assertEqual(self.kv.count(self.ns), 0)
        with self.assertRaises(TypeError):
            self.kv.pexpire_namespace(self.ns, "soon")

    def test_pipeline(self):
        with self.kv.pipeline() as p:
            p.put(self.ns, "k", "v", ttl=600).pttl(self.ns, "k").persist(self.ns, "k")
            p.pttl(self.ns, "k").pexpire(self.ns, "k", 600000).pexpire(self.ns, "none", 1)
            p.put(self.ns, "k", "w", ttl=5, if_version=0)
            results = p.execute()
        self.assertTrue(results[0])
        assert_pttl(self, results[1], 500000, 600000)
        self.assertEqual(results[2:7], [True, -1, True, False, None])

    def test_server_refuses_a_bad_expire_time(self):
        """The client never sends these; the server's answers, per the contract."""
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("PUT", self.ns, "k", "v", "PX", "0")
        self.assertEqual(caught.exception.code, "ERR")
        self.assertIn("invalid expire time", caught.exception.message)
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("PUT", self.ns, "k", "v", "PX", "10", "EX", "1")
        self.assertEqual(caught.exception.message, "syntax error")
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("PUT", self.ns, "k", "v", "EPHEMERAL", "EPHEMERAL")
        self.assertEqual(caught.exception.message, "syntax error")
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("PUT", self.ns, "k", "v", "PX")
        self.assertEqual(caught.exception.message, "syntax error")
        # An unknown option is an ERR (the contract says "syntax error"; the server names the
        # option, which is no less clear: only the code is checked).
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("PUT", self.ns, "k", "v", "KEEPTTL")
        self.assertEqual(caught.exception.code, "ERR")
        with self.assertRaises(ServerError) as caught:
            self.kv.execute_command("PEXPIRE", self.ns, "k", "1.5")
        self.assertEqual(caught.exception.code, "ERR")
        self.assertIsNone(self.kv.get(self.ns, "k"))
        self.assertEqual(self.kv.execute_command("put", self.ns, "k", "v", "ex", "100"), "OK")
        assert_pttl(self, self.kv.pttl(self.ns, "k"), 90000, 100000)


class EphemeralTests(ServerTestCase):
    """put(..., ephemeral=True): the key goes when the connection that wrote it closes."""

    def test_deleted_when_its_client_closes(self):
        other = self.server.client()
        self.addCleanup(other.close)
        self.assertTrue(other.put(self.ns, "e1", "v", ephemeral=True))
        self.assertIsInstance(other.put(self.ns, "e2", "v", ephemeral=True, if_version=0), int)
        other.put(self.ns, "plain", "p")
        self.assertEqual(self.kv.get(self.ns, "e1"), b"v")
        self.assertEqual(self.kv.pttl(self.ns, "e1"), -1)
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        other.close()
        deleted = set()
        while deleted != {b"e1", b"e2"}:
            change = take(feed, 1, Change)[0]
            deleted.update(key for key, value in change.items if value is None)
            self.assertLessEqual(deleted, {b"e1", b"e2"})
        self.assertEqual(self.kv.exists(self.ns, "e1", "e2"), 0)
        self.assertEqual(self.kv.get(self.ns, "plain"), b"p")

    def test_deleted_when_its_process_is_killed(self):
        child = spawn(self, HOLDER, self.server.socket, self.ns, "e", "ephemeral")
        self.assertEqual(read_line(child), "held")
        self.assertEqual(self.kv.get(self.ns, "e"), b"child-%d" % child.pid)
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        child.send_signal(signal.SIGKILL)
        wait_deleted(feed, b"e")
        self.assertIsNone(self.kv.get(self.ns, "e"))
        self.assertEqual(self.kv.get(self.ns, "e.plain"), b"stays")

    def close_and_wait(self, client, feed):
        """Closes ``client`` and returns once the server has dealt with it: ``client`` writes
        an ephemeral marker first, and after its delete this client writes one more change;
        returns the changes the feed saw up to that one."""
        client.put(self.ns, "marker", "m", ephemeral=True)
        client.close()
        seen = [wait_deleted(feed, b"marker")]
        self.kv.put(self.ns, "after", "a")
        while (b"after", b"a") not in seen[-1].items:
            seen += take(feed, 1, Change)
        return seen

    def test_plain_put_makes_the_key_persistent(self):
        other = self.server.client()
        self.addCleanup(other.close)
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        other.put(self.ns, "taken-over", "e", ephemeral=True)
        self.kv.put(self.ns, "taken-over", "plain")    # by another connection
        other.put(self.ns, "rewritten", "e", ephemeral=True)
        other.put(self.ns, "rewritten", "plain")       # by the same one
        seen = self.close_and_wait(other, feed)
        deletes = [key for change in seen for key, value in change.items if value is None]
        self.assertEqual(deletes, [b"marker"])
        self.assertEqual(self.kv.get(self.ns, "taken-over"), b"plain")
        self.assertEqual(self.kv.get(self.ns, "rewritten"), b"plain")

    def test_belongs_to_the_last_connection_that_wrote_it(self):
        first = self.server.client()
        second = self.server.client()
        self.addCleanup(first.close)
        self.addCleanup(second.close)
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        first.put(self.ns, "k", "first", ephemeral=True)
        second.put(self.ns, "k", "second", ephemeral=True)
        self.close_and_wait(first, feed)
        self.assertEqual(self.kv.get(self.ns, "k"), b"second")
        second.close()
        wait_deleted(feed, b"k")
        self.assertIsNone(self.kv.get(self.ns, "k"))

    def test_pexpire_and_persist_keep_the_owner(self):
        other = self.server.client()
        self.addCleanup(other.close)
        feed = self.kv.changes(self.ns)
        self.addCleanup(feed.close)
        other.put(self.ns, "k", "v", ephemeral=True, ttl=600)
        self.assertTrue(self.kv.persist(self.ns, "k"))     # from another connection
        self.assertTrue(self.kv.pexpire(self.ns, "k", 600000))
        other.close()
        wait_deleted(feed, b"k")
        self.assertIsNone(self.kv.get(self.ns, "k"))


class LockTests(ServerTestCase):
    """client.lock(): mutual exclusion between connections and processes, on a real server."""

    def other_client(self):
        client = self.server.client()
        self.addCleanup(client.close)
        return client

    def start_waiter(self, lock, timeout=PATIENCE):
        """Runs ``lock.acquire(timeout)`` in a thread; returns (thread, outcome list)."""
        outcome = []

        def wait():
            try:
                outcome.append(lock.acquire(timeout))
            except BaseException as error:  # reported by the test
                outcome.append(error)

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        self.addCleanup(thread.join, PATIENCE)
        return thread, outcome

    def test_holds_the_key_with_its_token_and_releases_it(self):
        lock = self.kv.lock(self.ns, "job", timeout=5)
        self.assertIsNone(lock.token)
        with lock as held:
            self.assertIs(held, lock)
            self.assertTrue(lock.locked)
            self.assertIsInstance(lock.token, int)
            self.assertEqual(lock.owner, ("%s:%d" % (socket.gethostname(), os.getpid())).encode())
            self.assertEqual(self.kv.getv(self.ns, "job"), (lock.owner, lock.token))
            self.assertEqual(self.kv.pttl(self.ns, "job"), -1)
            self.assertIn("held token=%d" % lock.token, repr(lock))
            first = lock.token
        self.assertFalse(lock.locked)
        self.assertEqual(lock.token, first)  # the last hold's token stays readable
        self.assertIsNone(self.kv.get(self.ns, "job"))
        # Again, by hand: a larger token.
        second = lock.acquire()
        self.assertGreater(second, first)
        self.assertEqual(lock.token, second)
        with self.assertRaises(RuntimeError):
            lock.acquire()  # not reentrant
        self.assertTrue(lock.release())
        self.assertIsNone(self.kv.get(self.ns, "job"))
        with self.assertRaises(RuntimeError):
            lock.release()
        # With a ttl, the key has a deadline.
        with self.kv.lock(self.ns, "job", ttl=600, owner="worker-7") as lock:
            self.assertEqual(self.kv.get(self.ns, "job"), b"worker-7")
            assert_pttl(self, self.kv.pttl(self.ns, "job"), 500000, 600000)
            self.assertGreater(lock.token, second)

    def test_released_when_the_body_raises(self):
        with self.assertRaises(KeyError):
            with self.kv.lock(self.ns, "job", timeout=5) as lock:
                self.assertEqual(self.kv.get(self.ns, "job"), lock.owner)
                raise KeyError("boom")
        self.assertFalse(lock.locked)
        self.assertIsNone(self.kv.get(self.ns, "job"))
        with self.kv.lock(self.ns, "job", timeout=0):
            pass

    def test_bad_namespace_is_a_server_error(self):
        with self.assertRaises(ServerError) as caught:
            with self.kv.lock("bad/ns", "job", timeout=0):
                self.fail("the body ran")
        self.assertEqual(caught.exception.code, "BADNS")

    def test_waiter_gets_the_lock_when_it_is_released(self):
        holder = self.kv.lock(self.ns, "job")
        first = holder.acquire()
        waiter = self.other_client().lock(self.ns, "job")
        thread, outcome = self.start_waiter(waiter)
        wait_until(lambda: followers(self.kv, self.ns) >= 1, "the waiter follows the key")
        # Changes to other keys under the same prefix do not hand it the lock.
        self.kv.put(self.ns, "job-2", "x")
        self.kv.delete(self.ns, "job-2")
        with self.kv.lock(self.ns, "job-3", timeout=0):  # another key: not blocked
            pass
        self.assertEqual(outcome, [])
        self.assertEqual(self.kv.getv(self.ns, "job"), (holder.owner, first))
        self.assertTrue(holder.release())
        thread.join(PATIENCE)
        self.assertEqual(len(outcome), 1)
        self.assertIsInstance(outcome[0], int, outcome)
        self.assertGreater(outcome[0], first)
        self.assertEqual(self.kv.getv(self.ns, "job"), (waiter.owner, outcome[0]))
        self.assertTrue(waiter.release())
        wait_until(lambda: followers(self.kv, self.ns) == 0, "the waiter's feed is closed")

    def test_timeout_raises_lock_timeout(self):
        holder = self.kv.lock(self.ns, "job")
        token = holder.acquire()
        other = self.other_client()
        before = self.kv.info_dict()["connected_clients"]
        for timeout in (0, 0.3):
            with self.assertRaises(LockTimeout) as caught:
                with other.lock(self.ns, "job", timeout=timeout):
                    self.fail("the body ran without the lock")
            self.assertEqual((caught.exception.namespace, caught.exception.key,
                              caught.exception.timeout), (self.ns, b"job", timeout))
        lock = other.lock(self.ns, "job", timeout=60)
        with self.assertRaises(LockTimeout):
            lock.acquire(timeout=0.2)  # acquire's own timeout wins
        self.assertFalse(lock.locked)
        self.assertEqual(self.kv.getv(self.ns, "job"), (holder.owner, token))  # still held
        # The failed attempts left no connection behind.
        wait_until(lambda: self.kv.info_dict()["connected_clients"] <= before,
                   "the timed-out locks' connections are closed")
        self.assertTrue(holder.release())
        self.assertIsNone(self.kv.get(self.ns, "job"))
        self.assertIsInstance(lock.acquire(timeout=0), int)
        lock.release()

    def test_ttl_frees_the_lock_and_a_late_release_does_not_touch_the_next_holder(self):
        first = self.kv.lock(self.ns, "job", ttl=0.3)
        token = first.acquire()
        self.assertNotEqual(self.kv.pttl(self.ns, "job"), -1)
        self.assertLessEqual(self.kv.pttl(self.ns, "job"), 300 + DEADLINE_SLACK_MS)
        second = self.other_client().lock(self.ns, "job", timeout=PATIENCE)
        later = second.acquire()  # once the first one's key has expired
        self.assertGreater(later, token)
        self.assertFalse(first.release())  # no longer held: nothing deleted
        self.assertEqual(self.kv.getv(self.ns, "job"), (second.owner, later))
        self.assertTrue(second.release())

    def test_mutual_exclusion_across_processes(self):
        """5 processes x 20 rounds of read-increment-write of a plain file under the lock:
        no increment is lost, and the tokens, in the order the holds happened, increase."""
        directory = tempfile.mkdtemp(prefix="akvpy.", dir="/tmp")
        self.addCleanup(shutil.rmtree, directory, True)
        counter = os.path.join(directory, "counter")
        tokens = os.path.join(directory, "tokens")
        with open(counter, "w") as f:
            f.write("0")
        workers = [spawn(self, LOCK_WORKER, self.server.socket, self.ns, "counter-lock",
                         counter, tokens, 20) for _ in range(5)]
        for worker in workers:
            self.assertEqual(read_line(worker), "ready")
        for worker in workers:  # all at once
            worker.stdin.write(b"go\n")
            worker.stdin.flush()
        for worker in workers:
            out, err = worker.communicate(timeout=PATIENCE * 3)
            self.assertEqual(worker.returncode, 0, err.decode("utf-8", "replace"))
            self.assertEqual(out, b"done\n")
        with open(counter) as f:
            self.assertEqual(f.read(), "100")
        with open(tokens) as f:
            holds = [tuple(int(field) for field in line.split()) for line in f]
        self.assertEqual(len(holds), 100)
        order = [token for token, _ in holds]
        self.assertEqual(order, sorted(set(order)), "tokens must increase from hold to hold")
        self.assertEqual(sorted(set(pid for _, pid in holds)), sorted(w.pid for w in workers))
        self.assertIsNone(self.kv.get(self.ns, "counter-lock"))

    def test_killed_holder_releases_the_lock_to_a_waiter(self):
        child = spawn(self, HOLDER, self.server.socket, self.ns, "job", "lock")
        token = int(read_line(child))
        self.assertEqual(self.kv.getv(self.ns, "job"),
                         (("%s:%d" % (socket.gethostname(), child.pid)).encode(), token))
        waiter = self.other_client().lock(self.ns, "job")
        thread, outcome = self.start_waiter(waiter)
        wait_until(lambda: followers(self.kv, self.ns) >= 1, "the waiter follows the key")
        self.assertEqual(outcome, [])
        killed = time.monotonic()
        child.send_signal(signal.SIGKILL)
        thread.join(PATIENCE)
        self.assertEqual(len(outcome), 1, "the waiter did not get the lock")
        self.assertIsInstance(outcome[0], int, outcome)
        self.assertGreater(outcome[0], token)
        self.assertEqual(self.kv.getv(self.ns, "job"), (waiter.owner, outcome[0]))
        self.assertLess(time.monotonic() - killed, PATIENCE)
        self.assertTrue(waiter.release())


class ExpiryRestartTests(unittest.TestCase):
    """Ephemeral keys, deadlines and locks across a server restart (own servers)."""

    def setUp(self):
        require_server()

    @local_only("a killed agent's ephemeral keys live until --ephemeral-ttl runs out")
    def test_ephemeral_keys_are_gone_and_deadlines_kept_after_a_restart(self):
        server = ServerProcess(fsync="always")
        self.addCleanup(server.cleanup)
        server.start()
        holder = server.client()
        self.addCleanup(holder.close)
        holder.put("r", "ephemeral", "e", ephemeral=True)
        holder.put("r", "plain", "p")
        holder.put("r", "expiring", "x", ttl=600)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(PATIENCE)
        server.start()
        with server.client() as kv:
            self.assertIsNone(kv.get("r", "ephemeral"))
            self.assertEqual(kv.get("r", "plain"), b"p")
            self.assertEqual(kv.get("r", "expiring"), b"x")
            assert_pttl(self, kv.pttl("r", "expiring"), 500000, 600000)
            self.assertEqual(kv.pttl("r", "plain"), -1)
        self.assertEqual(server.stop(), 0, server.log())

    def test_waiter_gets_the_lock_after_a_server_restart(self):
        server = ServerProcess(fsync="always")
        self.addCleanup(server.cleanup)
        server.start()
        holder_client = server.client()
        self.addCleanup(holder_client.close)
        holder = holder_client.lock("r", "job")
        token = holder.acquire()
        waiter = server.client().lock("r", "job", timeout=PATIENCE)
        outcome = []

        def wait():
            try:
                outcome.append(waiter.acquire())
            except BaseException as error:
                outcome.append(error)

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        with server.client() as kv:
            wait_until(lambda: followers(kv, "r") >= 1, "the waiter follows the key")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(PATIENCE)
        self.assertEqual(outcome, [])
        server.start()
        thread.join(PATIENCE)
        self.assertEqual(len(outcome), 1, "the waiter did not get the lock")
        self.assertIsInstance(outcome[0], int, outcome)
        self.assertGreater(outcome[0], token)
        self.assertFalse(holder.release())  # its connection died with the old server
        with server.client() as kv:
            self.assertEqual(kv.getv("r", "job"), (waiter.owner, outcome[0]))
        self.assertTrue(waiter.release())
        self.assertEqual(server.stop(), 0, server.log())

    def test_waiter_survives_the_server_dying_between_following_and_trying(self):
        # The moment a waiter has begun to follow the key and tries once more (the holder
        # may have gone meanwhile): the server is killed just then and comes back a little
        # later. That try's lost connection is a reason to try again once the server is
        # back, not an error: the restart freed the lock.
        server = ServerProcess(fsync="always")
        self.addCleanup(server.cleanup)
        server.start()
        holder = server.client().lock("r", "job")
        token = holder.acquire()
        restarts = []
        test = self

        class KilledWhileFollowing(actorkv.Lock):
            def _follow(self):
                feed = super()._follow()
                server.process.send_signal(signal.SIGKILL)
                server.process.wait(PATIENCE)
                restarter = threading.Timer(0.3, server.start)
                test.addCleanup(restarter.join)
                test.addCleanup(restarter.cancel)
                restarter.start()
                restarts.append(restarter)
                return feed

        waiter = KilledWhileFollowing(server.socket, "r", "job", timeout=PATIENCE)
        got = waiter.acquire()
        restarts[0].join()
        self.assertGreater(got, token)
        with server.client() as kv:
            self.assertEqual(kv.getv("r", "job"), (waiter.owner, got))
        self.assertTrue(waiter.release())
        self.assertFalse(holder.release())  # its connection died with the old server
        self.assertEqual(server.stop(), 0, server.log())



class SharedClientFakeServerTests(unittest.TestCase):
    """A Client used by two threads at once raises RuntimeError in the second, instead of
    sending on a connection whose next reply belongs to the first."""

    def test_second_thread_raises_instead_of_mixing_replies(self):
        path, listener = fake_listener(self, "silent")
        received = threading.Event()
        hang_up = threading.Event()

        def serve():  # takes the request, never answers
            conn, _ = listener.accept()
            with conn:
                if conn.recv(4096):
                    received.set()
                hang_up.wait(PATIENCE)

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        self.addCleanup(server.join, PATIENCE)
        self.addCleanup(hang_up.set)
        kv = Client(path, timeout=PATIENCE)
        self.addCleanup(kv.close)
        first = []
        thread = threading.Thread(target=lambda: first.append(
            self.assertRaises(ActorKVConnectionError, kv.ping)), daemon=True)
        thread.start()
        self.assertTrue(received.wait(PATIENCE))  # the first thread waits for its reply
        started = time.monotonic()
        with self.assertRaises(RuntimeError) as caught:
            kv.ping()
        self.assertIn("two threads at once", str(caught.exception))
        self.assertLess(time.monotonic() - started, 15)  # at once, not after a timeout
        hang_up.set()  # the first call ends: the connection is lost
        thread.join(PATIENCE)
        self.assertFalse(thread.is_alive())


class ReliabilityTests(unittest.TestCase):
    """Deadlines kept while the server is down, clients inherited across fork() or shared by
    threads, the first call after a server restart, and a pipeline cut off: each test runs
    its own server."""

    def setUp(self):
        require_server()

    def start(self, *flags, fsync="everysec"):
        server = ServerProcess(*flags, fsync=fsync)
        self.addCleanup(server.cleanup)
        return server.start()

    @staticmethod
    def kill(server):
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(PATIENCE)

    @local_only("sequences are etcd revisions, cluster-wide, not 1, 2, 3 per namespace")
    def test_feed_and_mirror_keep_their_timeout_while_the_server_is_down(self):
        """next_event(t) and poll() return in their own time while the server is down (with
        reconnect_timeout 30), the feed stays open, and a later call resumes it."""
        server = self.start(fsync="always")
        kv = server.client()
        self.addCleanup(kv.close)
        kv.put("down", "a", "1")
        feed = kv.changes("down", reconnect_timeout=30)
        self.addCleanup(feed.close)
        mirror = kv.mirror("down", reconnect_timeout=30)
        self.addCleanup(mirror.close)
        kv.put("down", "b", "2")
        self.assertEqual(take(feed, 1, Change)[0].items, [(b"b", b"2")])
        self.kill(server)
        for _ in range(3):  # each call its own timeout; the feed keeps trying
            started = time.monotonic()
            self.assertIsNone(feed.next_event(1))
            self.assertLess(time.monotonic() - started, 15)
            self.assertFalse(feed.closed)
            started = time.monotonic()
            mirror.poll()
            self.assertLess(time.monotonic() - started, 15)
            self.assertFalse(mirror.feed.closed)
            self.assertIsNone(feed.next_event(0))
        server.start()
        kv.put("down", "c", "3")
        self.assertEqual(take(feed, 1, Change)[0].items, [(b"c", b"3")])
        self.assertEqual(feed.reconnects, 1)
        deadline = time.monotonic() + PATIENCE
        while mirror.data.get(b"c") != b"3" and time.monotonic() < deadline:
            mirror.next_event(0.5)
        self.assertEqual(mirror.data, {b"a": b"1", b"b": b"2", b"c": b"3"})

    def test_feed_still_gives_up_after_reconnect_timeout_of_failures(self):
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        feed = kv.changes("down", reconnect_timeout=2)
        self.addCleanup(feed.close)
        self.kill(server)
        started = time.monotonic()
        with self.assertRaises(ActorKVConnectionError) as caught:
            while time.monotonic() - started < PATIENCE:
                feed.next_event(0.2)  # short calls: the 2 s count across them
        self.assertIn("could not resume within 2 s", str(caught.exception))
        self.assertTrue(feed.closed)

    def test_lock_waiter_keeps_its_timeout_while_the_server_is_down(self):
        """A waiter for a held lock (timeout 3) whose server dies raises at its own deadline,
        not after the feed's 60 s reconnect_timeout: ActorKVConnectionError, since the server
        was out of reach at the end (LockTimeout says someone holds the lock)."""
        server = self.start()
        holder = server.client().lock("locks", "out")
        holder.acquire()
        waiter = server.client().lock("locks", "out", timeout=3)
        outcome = []

        def wait():
            started = time.monotonic()
            try:
                outcome.append(waiter.acquire())
            except BaseException as error:
                outcome.append(error)
            outcome.append(time.monotonic() - started)

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        with server.client() as kv:
            wait_until(lambda: followers(kv, "locks") >= 1, "the waiter follows the key")
        self.kill(server)
        thread.join(PATIENCE)
        self.assertEqual(len(outcome), 2, outcome)
        error, elapsed = outcome
        self.assertIsInstance(error, ActorKVConnectionError)
        self.assertNotIsInstance(error, LockTimeout)
        self.assertIn("could not be reached", str(error))
        self.assertLess(elapsed, 15)
        self.assertFalse(waiter.locked)

    def test_lock_waiter_gets_lock_timeout_when_the_server_answers(self):
        """The same wait with the server up throughout: LockTimeout at the deadline."""
        server = self.start()
        holder = server.client().lock("locks", "busy")
        holder.acquire()
        self.addCleanup(holder.release)
        started = time.monotonic()
        with self.assertRaises(LockTimeout):
            server.client().lock("locks", "busy", timeout=1).acquire()
        self.assertLess(time.monotonic() - started, 15)

    def test_fork_children_reconnect_instead_of_sharing_the_connection(self):
        """Four children forked with a connected Client each read their own key 300 times
        while the parent uses the client too: every reply is the right one, and the parent's
        connection is untouched (its ephemeral key is still there after the children exit)."""
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        kv.put("fork", "parent", "alive", ephemeral=True)
        for i in range(4):
            kv.put("fork", "k%d" % i, "v%d" % i)
        children = []
        for i in range(4):
            pid = os.fork()
            if pid == 0:  # the child: exit status 0 if every reply was right
                status = 3
                try:
                    wrong = sum(kv.get("fork", "k%d" % i) != b"v%d" % i for _ in range(300))
                    status = 1 if wrong else 0
                except BaseException:
                    status = 2
                finally:
                    os._exit(status)
            children.append(pid)
        wrong = sum(kv.get("fork", "parent") != b"alive" for _ in range(300))
        statuses = [os.waitpid(pid, 0)[1] for pid in children]
        self.assertEqual(statuses, [0, 0, 0, 0], "1: a wrong value, 2: an error")
        self.assertEqual(wrong, 0)
        with server.client() as other:  # the parent's connection was never closed
            self.assertEqual(other.get("fork", "parent"), b"alive")
        self.assertEqual(kv.get("fork", "k0"), b"v0")

    def test_a_lock_inherited_by_a_fork_child_stays_the_parents(self):
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        lock = kv.lock("fork", "job")
        token = lock.acquire()
        pid = os.fork()
        if pid == 0:
            status = 2
            try:
                status = 0 if lock.release() is False else 1
            finally:
                os._exit(status)
        self.assertEqual(os.waitpid(pid, 0)[1], 0)
        self.assertEqual(kv.getv("fork", "job"), (lock.owner, token))
        self.assertTrue(lock.check())
        self.assertTrue(lock.release())

    def test_a_lock_goes_with_its_holder_killed_though_a_fork_child_lives_on(self):
        # The child closes its copy of the lock's connection as it forks: kill -9 of the holder
        # releases the lock at once, however long the child lives (it did not before).
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        ready_r, ready_w = os.pipe()
        holder = os.fork()
        if holder == 0:
            try:
                os.close(ready_r)
                lock = server.client().lock("fork", "dies")
                lock.acquire()
                child = os.fork()
                if child == 0:
                    time.sleep(30)  # lives on, using nothing
                    os._exit(0)
                os.write(ready_w, b"%d\n" % child)
                os.kill(os.getpid(), signal.SIGKILL)
            finally:
                os._exit(3)
        os.close(ready_w)
        with os.fdopen(ready_r) as ready:
            child = int(ready.readline() or "0")
        self.assertGreater(child, 0, "the holder did not get to fork")
        self.addCleanup(os.kill, child, signal.SIGKILL)
        self.assertEqual(os.waitpid(holder, 0)[1] & 0x7F, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while kv.getv("fork", "dies") is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertIsNone(kv.getv("fork", "dies"), "the lock outlived its holder while the holder's child lives")
        os.kill(child, 0)  # the child (init's now) is still alive: raises if it is not

    def test_threads_sharing_a_client_get_right_values_or_runtime_error(self):
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        for i in range(2):
            kv.put("threads", "k%d" % i, "v%d" % i)
        wrong, other_errors, refused = [], [], []

        def hammer(i):
            for _ in range(2000):
                try:
                    if kv.get("threads", "k%d" % i) != b"v%d" % i:
                        wrong.append(i)
                except RuntimeError as error:
                    refused.append(str(error))
                except BaseException as error:
                    other_errors.append(error)

        threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE)
        self.assertEqual(wrong, [])
        self.assertEqual(other_errors, [])
        self.assertTrue(all("two threads at once" in text for text in refused))
        self.assertEqual(kv.get("threads", "k1"), b"v1")

    def test_first_call_after_a_server_restart_succeeds(self):
        """After a restart (SIGKILL, then SIGTERM) the existing client's next call, a
        pipeline and a held lock's release go through: nothing of them had been sent on the
        dead connection, so they are sent again on a new one."""
        server = self.start(fsync="always")
        kv = server.client()
        self.addCleanup(kv.close)
        self.assertTrue(kv.put("restart", "a", "1"))
        idle = server.client()  # connected, never used
        self.addCleanup(idle.close)
        for kill in (True, False):
            if kill:
                self.kill(server)
            else:
                self.assertEqual(server.stop(), 0, server.log())
            server.start()
            self.assertTrue(kv.put("restart", "b", "2"))
            self.assertEqual(kv.get("restart", "a"), b"1")
        self.assertEqual(idle.get("restart", "b"), b"2")
        self.kill(server)
        server.start()
        with kv.pipeline() as p:
            self.assertEqual(p.put("restart", "c", "3").get("restart", "c").execute(),
                             [True, b"3"])
        if ETCD is None:  # a killed agent's ephemeral keys live until --ephemeral-ttl
            lock = kv.lock("restart", "job")
            lock.acquire()
            self.kill(server)
            server.start()
            self.assertFalse(lock.check())  # the restart released it
            self.assertFalse(lock.release())

    def test_call_while_the_server_is_down_says_nothing_was_sent(self):
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        kv.ping()
        self.kill(server)
        with self.assertRaises(ActorKVConnectionError) as caught:
            kv.put("down", "k", "v")
        self.assertIn("cannot connect", str(caught.exception))
        self.assertFalse(kv.connected)

    @local_only("400,000 writes through etcd take minutes")
    def test_pipeline_cut_off_keeps_the_replies_received(self):
        """The server is killed in the middle of a large pipeline: the error carries the
        results that came before (all +OK), fewer than the commands sent."""
        server = self.start()
        kv = server.client()
        self.addCleanup(kv.close)
        count = 400000
        killer_done = threading.Event()

        def killer():
            try:
                with server.client() as watcher:
                    wait_until(lambda: watcher.count("cut") >= 2000, "the pipeline runs")
                self.kill(server)
            finally:
                killer_done.set()

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        pipe = kv.pipeline()
        for i in range(count):
            pipe.put("cut", "k%07d" % i, "v")
        with self.assertRaises(ActorKVConnectionError) as caught:
            pipe.execute(raise_on_error=False)
        self.assertTrue(killer_done.wait(PATIENCE))
        replies = caught.exception.replies
        self.assertIsInstance(replies, list)
        self.assertLess(len(replies), count)
        self.assertGreater(len(replies), 0)
        self.assertTrue(all(reply is True for reply in replies))
        self.assertIn("replies received", str(caught.exception))
        self.assertFalse(kv.connected)


if __name__ == "__main__":
    unittest.main()
