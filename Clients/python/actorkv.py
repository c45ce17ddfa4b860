"""A small, dependency-free Python client for ActorKV.

ActorKV is a local key-value server that listens on a Unix-domain socket and speaks a
Redis-compatible protocol (RESP2). This module is a single file that needs only the Python
standard library (Python 3.8 or newer): copy it next to your program or put its folder on
``PYTHONPATH``.

Example::

    from actorkv import Client

    with Client("/run/myapp/actorkv.sock") as kv:
        kv.put("config", "theme", "dark")
        assert kv.get("config", "theme") == b"dark"
        for key, value in kv.scan("config", prefix="th"):
            print(key, value)
        kv.incr("stats", "visits")                      # a counter: 1, 2, 3, ...
        kv.update("config", "motd", lambda old: (old or b"") + b"!")  # no lost updates

Keys, values and namespace names may be given as ``str`` (encoded as UTF-8) or as bytes-like
objects; keys and values come back as ``bytes``.

Errors all derive from :class:`ActorKVError`:

* :class:`ServerError` -- the server answered ``-CODE message`` (``code`` is e.g. ``"BADNS"``);
* :class:`ActorKVConnectionError` -- cannot connect, or the connection was lost (also a
  built-in :class:`ConnectionError`); :class:`ActorKVTimeoutError` for a timeout;
  :class:`ConnectionRefusedByServer` (also a :class:`ServerError`) when the server refuses the
  connection (``MAXCLIENTS``, ``--allow-uid``);
* :class:`ProtocolError` -- the server's reply could not be parsed;
* :class:`ConflictError` -- :meth:`Client.update` lost the race on every attempt;
* :class:`CompactedError` -- a :class:`ServerError` (code ``COMPACTED``): the changes a
  change feed asked for are no longer held by the server;
* :class:`LockTimeout` -- a :class:`Lock` stayed held by someone else for all of its timeout
  (also a built-in :class:`TimeoutError`).

A :class:`Client` is one connection and is not thread-safe: give each thread its own client
(a second thread calling it while a call is running gets ``RuntimeError``, not a reply meant
for the first). In a child of ``fork()`` an inherited client's copy of the connection
is closed at the fork (the parent's is left alone), and it connects anew at its first call. After a server restart, the first call on an
existing client is sent again on a new connection by itself (nothing of it had been sent).

To follow a namespace's changes as they are written, see :meth:`Client.changes` (an iterator of
:class:`Change` events that reconnects and resumes by itself) and :meth:`Client.mirror` (a local
dict kept current).

Keys can expire (``put(..., ttl=seconds)``, :meth:`Client.pexpire`, :meth:`Client.persist`,
:meth:`Client.pttl`) or belong to a connection (``put(..., ephemeral=True)``: deleted when it
closes, even if the process is killed). On those, :meth:`Client.lock` builds a lock shared by
every process, released by the server if its holder dies, with a fencing token::

    with kv.lock("locks", "job-42", timeout=10) as lock:   # LockTimeout if still held
        print(lock.token)                                  # larger for each new holder
        # storage.write(data, fence=lock.token)            # what the lock protects checks it
"""

import builtins
import collections
import errno
import itertools
import math
import os
import random
import re
import select
import socket
import threading
import time
import weakref

__all__ = [
    "ActorKVConnectionError",
    "ActorKVError",
    "ActorKVTimeoutError",
    "Change",
    "ChangeFeed",
    "Client",
    "CompactedError",
    "ConflictError",
    "ConnectionRefusedByServer",
    "ERROR_CODES",
    "Lock",
    "LockTimeout",
    "Mirror",
    "NOT_READY",
    "PermissionDeniedError",
    "Pipeline",
    "ProtocolError",
    "ReplyParser",
    "ServerError",
    "Snapshot",
    "Synced",
    "encode_command",
    "parse_client_list",
    "parse_info",
]

__version__ = "0.1.0"

#: The default socket path, the same as ``actorkvd``'s default: where a :class:`Client` created
#: without a path connects when ``$ACTORKV_SOCKET`` is unset or empty.
DEFAULT_SOCKET = "./actorkv.sock"

#: The first bytes of the five RESP2 reply types: + - : $ *
_REPLY_TYPES = frozenset(b"+-:$*")

#: Every error code the server sends (the first word of ``-CODE message``, the ``code`` of a
#: :class:`ServerError`); protocol.md's error table says when each is sent. The same codes in
#: the same order as the server's ``WireErrorCode.allCases`` (a Swift test checks).
ERROR_CODES = ("ERR", "BADNS", "BADKEY", "TOOBIG", "BADCURSOR", "CORRUPT", "IOERR", "SHUTDOWN",
               "PROTO", "MAXCLIENTS", "NOPERM", "COMPACTED", "LAGGING", "EXECABORT", "CROSSNS",
               "NOPROTO", "UNAVAILABLE")

#: The codes of :data:`ERROR_CODES` after which the server may close the connection (a Swift
#: test checks them against ``WireErrorCode.closesConnection``). ``NOPERM`` closes it only on
#: accept, with :data:`_REFUSAL_PREFIX`: see :func:`_closes_connection`.
_FATAL_CODES = frozenset({"PROTO", "MAXCLIENTS", "NOPERM", "LAGGING"})

#: How the message of a ``NOPERM`` sent on accept starts (to a peer outside ``--allow-uid`` /
#: ``--allow-gid``, then the server closes the connection); a command's ``NOPERM`` never starts
#: so (protocol.md, "Namespace permissions").
_REFUSAL_PREFIX = "connection refused: "

#: The range of the server's integers: INCR values and deltas, and versions (0 up to the
#: maximum).
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

#: Seconds :meth:`Client.update` waits after a conflict, at most: the first bound, doubled after
#: each further conflict up to the second. The wait is random below the bound (jitter), so that
#: writers racing for one key spread out instead of colliding again and again.
_UPDATE_BACKOFF = (0.0005, 0.05)

#: poll(2) where there is one (no limit on descriptor numbers); select(2) otherwise.
_HAVE_POLL = hasattr(select, "poll")

# Every Client with a connection, so that a child of fork() closes its copies at once (see
# _close_inherited_connections): a copy left open until the child's first call (if it ever
# made one) kept the connection, and with it a lock or an EPHEMERAL key, alive after the
# parent died, for as long as the child lived.
_CONNECTED_CLIENTS = weakref.WeakSet()


def _close_inherited_connections():
    """In a child of fork(), at once: closes this process's copy of every inherited connection
    (never shutting one down: it is the parent's), as a client's first call in the child would."""
    for client in list(_CONNECTED_CLIENTS):
        if client._sock is not None and client._pid != os.getpid():
            client._forget_inherited()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_connections)

#: What a send on a connection the server has closed fails with, having taken no byte.
_UNSENT_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN})


class _NothingSent(Exception):
    """Internal: the first send of a call failed before the socket took any byte of it, on a
    connection that was open before the call; ``block`` is the unsent first block."""

    def __init__(self, block):
        super().__init__("nothing sent")
        self.block = block


def _maybe_applied(sent_any, count, received):
    """The end of a lost connection's message: whether the requests may have been applied."""
    if not sent_any:
        return " (nothing was sent: not applied)"
    if count == 1:
        return " (the request may or may not have been applied)"
    return (" (%d of %d replies received; the requests after them may or may not have been "
            "applied)" % (received, count))


# --------------------------------------------------------------------------------------------
# Errors


class ActorKVError(Exception):
    """Base class of every error this module raises (except ``ValueError``/``TypeError`` for
    arguments that are wrong before anything is sent)."""


class ServerError(ActorKVError):
    """The server replied with an error, ``-CODE message``.

    Attributes:
        code: the first word of the error line, one of :data:`ERROR_CODES`: ``"ERR"``,
            ``"BADNS"``, ``"BADKEY"``, ``"TOOBIG"``, ``"BADCURSOR"``, ``"CORRUPT"``,
            ``"IOERR"``, ``"SHUTDOWN"``, ``"PROTO"``, ``"MAXCLIENTS"`` (a
            :class:`ConnectionRefusedByServer`), ``"NOPERM"`` (a command's is a
            :class:`PermissionDeniedError`; the refusal of a connection on accept,
            ``connection refused: ...``, a :class:`ConnectionRefusedByServer`),
            ``"COMPACTED"`` (a :class:`CompactedError`), ``"LAGGING"`` (a change feed
            answers it by resuming), ``"EXECABORT"``, ``"CROSSNS"`` (``EXEC`` of a
            transaction: nothing applied), ``"NOPROTO"`` (``HELLO`` with an unsupported
            version) or ``"UNAVAILABLE"`` (cluster mode: etcd unreachable; nothing applied,
            try again). A newer server's code not in that list is kept as sent.
        message: the rest of the line (may be empty).
    """

    def __init__(self, code, message=""):
        self.code = code
        self.message = message
        super().__init__(code + (" " + message if message else ""))

    @classmethod
    def from_line(cls, line):
        """Builds the error from the text of an error reply (without ``-`` and ``\\r\\n``):
        a :class:`CompactedError` for the code ``COMPACTED``, a :class:`PermissionDeniedError`
        for a command's ``NOPERM``, a :class:`ConnectionRefusedByServer` for ``MAXCLIENTS``
        and a ``NOPERM`` refusing the connection on accept."""
        code, _, message = line.partition(" ")
        if cls is ServerError and code == "COMPACTED":
            return CompactedError(code, message)
        if cls is ServerError and code == "NOPERM" and not message.startswith(_REFUSAL_PREFIX):
            return PermissionDeniedError(code, message)
        if cls is ServerError and code in ("MAXCLIENTS", "NOPERM"):
            return ConnectionRefusedByServer(code, message)
        return cls(code, message)

    def __eq__(self, other):
        return (isinstance(other, ServerError) and other.code == self.code
                and other.message == self.message)

    def __hash__(self):
        return hash((self.code, self.message))

    def __repr__(self):
        return "ServerError(%r, %r)" % (self.code, self.message)


class CompactedError(ServerError):
    """``-COMPACTED oldest available sequence is N``: ``CHANGES ... FROM seq`` asked for changes
    the server no longer holds (they were compacted away; it keeps the last
    ``--changes-history`` of them). Nothing can fill that gap: follow again with a snapshot
    (``snapshot=True``, or :meth:`Client.mirror`, which does so by itself).

    Attributes:
        oldest: N, the oldest change the server still holds (an int), or None if the
            message does not end with a number.
    """

    def __init__(self, code="COMPACTED", message=""):
        super().__init__(code, message)
        found = re.search(r"(\d+)\s*$", message)
        self.oldest = int(found.group(1)) if found else None

    def __repr__(self):
        return "CompactedError(%r, %r)" % (self.code, self.message)


class PermissionDeniedError(ServerError):
    """``-NOPERM no write permission on namespace 'config' for uid 33``: the server (started
    with ``actorkvd --acl FILE``) denied a right the command needs on its namespace (``read``,
    ``write`` or ``admin``), or ``ACL LOAD`` from a uid other than the server's own. Nothing was
    applied, and the connection stays usable: the other commands of a pipeline get their own
    replies. A :class:`ChangeFeed` on a namespace it may not read ends with it, also when a
    reload of the server's rules withdraws the right while it follows (the server then closes
    the feed's connection); it does not resume.

    A connection refused on accept (``--allow-uid``/``--allow-gid``, ``-NOPERM connection
    refused: ...``) is not this class but a :class:`ConnectionRefusedByServer` with code
    ``NOPERM``, after which the connection is closed.
    """

    def __init__(self, code="NOPERM", message=""):
        super().__init__(code, message)

    def __repr__(self):
        return "PermissionDeniedError(%r, %r)" % (self.code, self.message)


def _closes_connection(error):
    """Whether the server closes the connection after the error reply ``error`` (a
    :class:`ServerError`): the codes of :data:`_FATAL_CODES`, but ``NOPERM`` only when it
    refuses the connection on accept (its message starts with :data:`_REFUSAL_PREFIX`); a
    command's ``NOPERM`` leaves the connection usable."""
    if error.code == "NOPERM":
        return error.message.startswith(_REFUSAL_PREFIX)
    return error.code in _FATAL_CODES


class ActorKVConnectionError(ActorKVError, builtins.ConnectionError):
    """The client cannot connect to the server, or the connection was lost or closed.

    It is also a built-in :class:`ConnectionError`. After it, the client's socket is closed;
    the next command opens a new connection. A command that failed this way may or may not
    have been applied by the server: the message says "nothing was sent: not applied" when
    it certainly was not. (A call whose connection the server had already closed while it was
    idle -- a server restart, say -- is sent again on a new connection by itself, once, since
    no byte of it was taken: that raises nothing.)

    Two refusals by the server come as a :class:`ServerError` instead (the server accepted
    the connection to say why it refuses it): ``MAXCLIENTS`` (no room for another connection)
    and ``NOPERM connection refused: ...`` (``--allow-uid``/``--allow-gid`` leave this
    process out). Catch both to handle "cannot connect".

    Attributes:
        replies: the replies received before the connection was lost, in order; for
            :meth:`Pipeline.execute`, the results of the commands before the cut (the
            commands after them may or may not have been applied). Empty if none came.
    """

    replies = ()


class ConnectionRefusedByServer(ServerError, ActorKVConnectionError):
    """The server accepted the connection only to refuse it, and closed it: ``-MAXCLIENTS``
    (``--max-clients`` connections are open, or it is out of file descriptors) or ``-NOPERM
    connection refused: ...`` (its ``--allow-uid``/``--allow-gid`` leave this process out).
    Both a :class:`ServerError` (``code`` and ``message`` as sent) and an
    :class:`ActorKVConnectionError` (so "cannot connect" handlers catch it, as the ``actorkv``
    CLI exits 4 for both). Nothing was applied; the next call connects again.
    """

    def __repr__(self):
        return "ConnectionRefusedByServer(%r, %r)" % (self.code, self.message)


class ActorKVTimeoutError(ActorKVConnectionError, builtins.TimeoutError):
    """The server did not answer (or accept) within the client's timeout. The connection is
    closed, since a late reply would otherwise be taken for the answer to the next command."""


class ProtocolError(ActorKVError):
    """The bytes received are not a valid RESP2 reply. The connection is closed. ``replies``:
    as for :class:`ActorKVConnectionError`."""

    replies = ()


class ConflictError(ActorKVError):
    """A read-modify-write (:meth:`Client.update`) found the key written by someone else
    between its read and its conditional write on every one of its attempts. Nothing was
    written by it; the message names the key and the number of attempts."""


class LockTimeout(ActorKVError, builtins.TimeoutError):
    """A :class:`Lock` was not acquired within its ``timeout``: someone else held it the whole
    time. Nothing is held (the lock's connection is closed). It is also a built-in
    :class:`TimeoutError`, but not an :class:`ActorKVConnectionError`: the server answered.

    Attributes:
        namespace: the lock's namespace (str).
        key: the lock's key (bytes).
        timeout: the seconds waited.
    """

    def __init__(self, namespace, key, timeout):
        self.namespace = namespace
        self.key = key
        self.timeout = timeout
        if timeout == 0:
            text = "the lock %r in namespace %r is held by someone else (one try: timeout 0)" % (
                key, namespace)
        else:
            text = "the lock %r in namespace %r was held by someone else for all of %g s" % (
                key, namespace, timeout)
        super().__init__(text)


# --------------------------------------------------------------------------------------------
# Encoding


def _to_bytes(value, what="argument"):
    """Returns ``value`` as bytes: str is UTF-8 encoded, bytes-like objects are copied and
    ints are written in decimal. Anything else is a ``TypeError``."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode("ascii")
    raise TypeError("%s must be str, bytes, bytearray, memoryview or int, not %s"
                    % (what, type(value).__name__))


#: What the arguments of a command are called in a TypeError, after the command's name: the
#: namespace, then the key (and PUT's value); others are "argument N".
_ARGUMENT_NAMES = {b"PUT": ("namespace", "key", "value")}
_NAMESPACE_COMMANDS = frozenset(
    b"GET GETV PUT DEL EXISTS COUNT INCR PEXPIRE PERSIST PTTL SCAN BATCH COMPACT CHANGES".split())


def _argument_name(args, index):
    """How :func:`encode_command` names ``args[index]`` in a TypeError."""
    if index == 0:
        return "the command name"
    try:
        command = _to_bytes(args[0]).upper()
    except TypeError:
        command = b""
    names = _ARGUMENT_NAMES.get(command)
    if names is None and command in _NAMESPACE_COMMANDS:
        names = ("namespace", "key")
    if names is not None and index <= len(names):
        return "the %s (argument %d of %s)" % (names[index - 1], index, command.decode())
    return "argument %d of %s" % (index, command.decode("ascii", "replace") or "the command")


def encode_command(*args):
    """Encodes one request as a RESP2 multibulk array (binary safe).

    >>> encode_command("GET", "ns", b"k")
    b'*3\\r\\n$3\\r\\nGET\\r\\n$2\\r\\nns\\r\\n$1\\r\\nk\\r\\n'
    """
    if not args:
        raise ValueError("a command needs at least a name")
    parts = [b"*%d\r\n" % len(args)]
    for index, arg in enumerate(args):
        try:
            data = _to_bytes(arg)
        except TypeError:
            raise TypeError("%s must be str, bytes, bytearray, memoryview or int, not %s"
                            % (_argument_name(args, index), type(arg).__name__)) from None
        parts.append(b"$%d\r\n" % len(data))
        parts.append(data)
        parts.append(b"\r\n")
    return b"".join(parts)


def _next_block(chunks, size):
    """Takes encoded requests from the iterator ``chunks`` until they add up to ``size`` bytes
    (or it ends) and returns them as one bytes-like object; empty once ``chunks`` is
    exhausted. A request larger than ``size`` is returned as it is, not copied."""
    parts = []
    total = 0
    for chunk in chunks:
        if chunk:
            parts.append(chunk)
            total += len(chunk)
            if total >= size:
                break
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# Decoding


class _NotReady(object):
    """The type of :data:`NOT_READY`."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "NOT_READY"

    def __bool__(self):
        return False


#: What :meth:`ReplyParser.gets` returns while no complete reply is buffered (``None`` is a
#: real reply: the null bulk string).
NOT_READY = _NotReady()


class ReplyParser(object):
    """An incremental RESP2 reply parser. Pure: it never touches a socket.

    Feed it bytes as they arrive, in pieces of any size (even one byte at a time), and take
    complete replies out in order::

        parser = ReplyParser()
        parser.feed(b"+OK\\r\\n$3\\r\\nab")
        parser.gets()   # 'OK'
        parser.gets()   # NOT_READY
        parser.feed(b"c\\r\\n")
        parser.gets()   # b'abc'

    Replies are converted as follows:

    * ``+text`` (simple string) -> ``str``
    * ``-CODE message`` (error) -> a :class:`ServerError` instance (returned, not raised)
    * ``:n`` (integer) -> ``int``
    * ``$n`` (bulk string) -> ``bytes``; ``$-1`` -> ``None``
    * ``*n`` (array) -> ``list``; ``*-1`` -> ``None``

    Partly received arrays and bulk strings are kept, so the work done is linear in the
    number of bytes fed, whatever the piece sizes. A malformed reply raises
    :class:`ProtocolError`; the parser is unusable afterwards.
    """

    #: Longest ``+``/``-``/``:``/``$``/``*`` line accepted, without its ``\\r\\n``.
    max_line_length = 64 * 1024
    #: Deepest array nesting accepted.
    max_depth = 32

    def __init__(self, max_bulk_length=1 << 31):
        """``max_bulk_length`` bounds the ``$n`` a reply may announce."""
        self.max_bulk_length = max_bulk_length
        self._buffer = bytearray()
        self._pos = 0
        # Arrays being filled, innermost last: [elements still expected, elements so far].
        self._stack = []
        self._replies = collections.deque()
        self._failed = None

    def feed(self, data):
        """Adds received bytes and parses every reply they complete.

        Raises :class:`ProtocolError` if the bytes cannot be a reply.
        """
        if self._failed is not None:
            raise self._failed
        if data:
            self._buffer += data
        try:
            self._parse()
        except ProtocolError as error:
            self._failed = error
            raise
        finally:
            if self._pos:
                del self._buffer[:self._pos]
                self._pos = 0

    def gets(self):
        """Returns the next complete reply, or :data:`NOT_READY` if none is buffered."""
        if self._replies:
            return self._replies.popleft()
        return NOT_READY

    def __len__(self):
        """The number of complete replies waiting to be taken."""
        return len(self._replies)

    @property
    def buffered(self):
        """Bytes received that are not yet part of a complete reply (for diagnostics)."""
        return len(self._buffer) - self._pos

    @property
    def in_reply(self):
        """True if part of a reply has been received (bytes buffered or an array open)."""
        return bool(self._stack) or self.buffered > 0

    def _line(self, start):
        """Returns (text, index after ``\\r\\n``) for the line whose type byte is at ``start``,
        or None if its end has not arrived."""
        buf = self._buffer
        end = buf.find(b"\r\n", start + 1)
        if end < 0:
            if len(buf) - start > self.max_line_length + 2:
                raise ProtocolError("reply line longer than %d bytes" % self.max_line_length)
            return None
        if end - start - 1 > self.max_line_length:
            raise ProtocolError("reply line longer than %d bytes" % self.max_line_length)
        line = bytes(buf[start + 1:end])
        if b"\n" in line:
            raise ProtocolError("bare \\n inside a reply line")
        return line, end + 2

    @staticmethod
    def _integer(line, what):
        try:
            text = line.decode("ascii")
            value = int(text)
        except (UnicodeDecodeError, ValueError):
            raise ProtocolError("invalid %s %r" % (what, line))
        if text != text.strip() or "_" in text or (text.startswith("+")):
            raise ProtocolError("invalid %s %r" % (what, line))
        return value

    def _parse(self):
        buf = self._buffer
        while self._pos < len(buf):
            start = self._pos
            kind = buf[start]
            if kind not in _REPLY_TYPES:
                raise ProtocolError("unexpected reply type byte %r" % bytes([kind]))
            got = self._line(start)
            if got is None:
                return
            line, after = got
            if kind == 0x2B:  # '+'
                value = line.decode("utf-8", "replace")
            elif kind == 0x2D:  # '-'
                value = ServerError.from_line(line.decode("utf-8", "replace"))
            elif kind == 0x3A:  # ':'
                value = self._integer(line, "integer reply")
            elif kind == 0x24:  # '$'
                length = self._integer(line, "bulk length")
                if length == -1:
                    value = None
                elif length < 0 or length > self.max_bulk_length:
                    raise ProtocolError("invalid bulk length %d" % length)
                else:
                    end = after + length
                    if len(buf) < end + 2:
                        return
                    if buf[end:end + 2] != b"\r\n":
                        raise ProtocolError("bulk string not followed by \\r\\n")
                    value = bytes(buf[after:end])
                    after = end + 2
            elif kind == 0x2A:  # '*'
                count = self._integer(line, "array length")
                if count == -1:
                    value = None
                elif count < 0:
                    raise ProtocolError("invalid array length %d" % count)
                elif count == 0:
                    value = []
                else:
                    if len(self._stack) >= self.max_depth:
                        raise ProtocolError("arrays nested deeper than %d" % self.max_depth)
                    self._stack.append([count, []])
                    self._pos = after
                    continue
            self._pos = after
            self._complete(value)

    def _complete(self, value):
        """Places a finished value in the innermost open array, closing arrays that fill up."""
        stack = self._stack
        while stack:
            top = stack[-1]
            top[1].append(value)
            top[0] -= 1
            if top[0]:
                return
            stack.pop()
            value = top[1]
        self._replies.append(value)


#: Where a field of an ``ns_<name>`` INFO line starts: the line's start or a comma, then
#: ``name=``.
_INFO_FIELD = re.compile(r"(?:^|,)([A-Za-z_][A-Za-z0-9_]*)=")

#: INFO fields whose value is free text that runs to the end of the line (it may hold commas
#: and ``=``): the server writes ``error=`` last, as in ``status=unavailable,error=<message>``.
_INFO_TEXT_FIELDS = frozenset({"error"})


def _info_convert(value):
    try:
        return int(value)
    except ValueError:
        return value


def _info_fields(value):
    """Parses ``a=1,b=ok,error=free, text`` into a dict, or returns None if ``value`` does
    not start with ``name=``. A comma separates fields only when ``name=`` follows it, and
    an ``error`` field takes the rest of the line, so its text may contain ``,`` and ``=``."""
    starts = list(_INFO_FIELD.finditer(value))
    if not starts or starts[0].start() != 0:
        return None
    fields = {}
    for index, start in enumerate(starts):
        name = start.group(1)
        if name in _INFO_TEXT_FIELDS or index + 1 == len(starts):
            text = value[start.end():]
            fields[name] = text if name in _INFO_TEXT_FIELDS else _info_convert(text)
            break
        fields[name] = _info_convert(value[start.end():starts[index + 1].start()])
    return fields


def parse_info(text):
    """Parses the text of ``INFO`` into a dict.

    ``key:value`` lines become entries; values that are decimal integers become ``int``;
    values made of ``name=value`` pairs separated by commas (the ``ns_<name>`` lines) become
    dicts (with integer values converted too), under ``ns_`` and the namespace's name as given
    (INFO writes a ``:`` in a name as ``%3A``, which is read back). The ``error`` field of an unavailable
    namespace (``status=unavailable,error=<message>``) is the rest of the line, as a str,
    commas included. Section headers (``# Server``) and blank lines are skipped.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    info = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        if key.startswith("ns_"):
            key = key.replace("%3A", ":")
        fields = _info_fields(value) if key.startswith("ns_") else None
        info[key] = fields if fields is not None else _info_convert(value)
    return info


def parse_client_list(text):
    """Parses the text of ``CLIENT LIST`` into a list of dicts, one per connection in the
    server's order: each ``name=value`` of its line an entry, decimal values as ``int``
    (``id``, ``age``, ``uid``, ``gid``, ``pid``, ...), the others as ``str`` (``name`` is ``""``
    for a connection without one)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    clients = []
    for line in text.splitlines():
        if line.strip():
            pairs = (field.partition("=") for field in line.split(" ") if field)
            clients.append({name: _info_convert(value) if value else value for name, _, value in pairs})
    return clients


# --------------------------------------------------------------------------------------------
# Commands, shared by Client (runs them now) and Pipeline (queues them)


def _identity(reply):
    return reply


def _is_ok(reply):
    return reply == "OK"


def _decode_text(reply):
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply


def _decode_list(reply):
    return [_decode_text(item) for item in reply]


def _batch_results(reply):
    if reply is None:  # *-1: a guard did not hold, nothing was applied
        return None
    if not isinstance(reply, list):
        raise ProtocolError("unexpected BATCH reply %r" % (reply,))
    return [True if item == "OK" else item for item in reply]


def _batch_applied(reply):
    if reply is not None and not isinstance(reply, list):
        raise ProtocolError("unexpected BATCH reply %r" % (reply,))
    return reply is not None


def _versioned(reply):
    if reply is None:
        return None
    if not isinstance(reply, list) or len(reply) != 2 or not isinstance(reply[0], bytes) \
            or not isinstance(reply[1], int) or reply[1] < 1:
        raise ProtocolError("unexpected GETV reply %r" % (reply,))
    return reply[0], reply[1]


def _new_version(reply):
    if reply is None:  # $-1: the condition did not hold, nothing was written
        return None
    if not isinstance(reply, int) or reply < 1:
        raise ProtocolError("unexpected reply to PUT ... IFVERSION %r" % (reply,))
    return reply


def _integer(reply):
    if not isinstance(reply, int):
        raise ProtocolError("expected an integer reply, got %r" % (reply,))
    return reply


def _optional_integer(reply):
    if reply is None:
        return None
    return _integer(reply)


def _two_integers(reply):
    if not (isinstance(reply, list) and len(reply) == 2 and all(isinstance(x, int) for x in reply)):
        raise ProtocolError("expected an array of two integers, got %r" % (reply,))
    return reply


def _check_int(value, what, low, high):
    """Returns ``value`` if it is an int (not a bool) from ``low`` to ``high``; raises
    ``TypeError`` or ``ValueError`` otherwise, before anything is sent."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    if not low <= value <= high:
        raise ValueError("%s must be from %d to %d, not %d" % (what, low, high, value))
    return value


def _check_version(version, what="if_version"):
    """A version to compare with: an int from 0 (absent) to 2**63 - 1."""
    return _check_int(version, what, 0, _INT64_MAX)


def _check_delta(delta, what="delta"):
    """An INCR delta: a signed 64-bit int."""
    return _check_int(delta, what, _INT64_MIN, _INT64_MAX)


def _ttl_milliseconds(ttl, what="ttl"):
    """A time to live in seconds (an int or a float, more than 0) as the whole milliseconds
    ``PX`` takes: rounded to the nearest, and at least 1. ``TypeError`` for anything but an
    int or float (a bool included), ``ValueError`` for 0 or less, NaN, infinity or more
    milliseconds than a signed 64-bit integer holds."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError("%s must be a number of seconds (int or float), not %s"
                        % (what, type(ttl).__name__))
    if isinstance(ttl, float) and not math.isfinite(ttl):
        raise ValueError("%s must be a finite number of seconds, not %r" % (what, ttl))
    if not ttl > 0:
        raise ValueError("%s must be more than 0 seconds, not %r" % (what, ttl))
    milliseconds = ttl * 1000 if isinstance(ttl, int) else int(round(ttl * 1000.0))
    if milliseconds > _INT64_MAX:
        raise ValueError("%s of %r seconds is too long" % (what, ttl))
    return max(1, milliseconds)


def _check_timeout(timeout, what="timeout"):
    """Seconds to wait: None (no limit), or an int or float from 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("%s must be None or a number of seconds, not %s"
                        % (what, type(timeout).__name__))
    if not timeout >= 0 or (isinstance(timeout, float) and math.isinf(timeout)):
        raise ValueError("%s must be None or a finite number of seconds from 0, not %r"
                         % (what, timeout))
    return timeout


def _boolean(reply):
    """``:1``/``:0`` as True/False."""
    if reply not in (0, 1) or isinstance(reply, bool):
        raise ProtocolError("expected :0 or :1, got %r" % (reply,))
    return reply == 1


def _pttl(reply):
    if not isinstance(reply, int) or reply < -2:
        raise ProtocolError("unexpected PTTL reply %r" % (reply,))
    return reply


def _scan_page(reply):
    if not isinstance(reply, list) or len(reply) != 2 or not isinstance(reply[1], list) \
            or len(reply[1]) % 2:
        raise ProtocolError("unexpected SCAN reply %r" % (reply,))
    flat = reply[1]
    return reply[0], [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


#: The op tuples :meth:`_Commands.batch` takes, for error messages.
_BATCH_OPS = ("('put', key, value), ('del', key), ('ifversion', key, version) "
              "or ('incr', key, delta)")


def _batch_arguments(ops):
    """Turns ``[("put", k, v), ("del", k), ("ifversion", k, version), ("incr", k, delta), ...]``
    into BATCH's arguments. Raises ``ValueError`` for a malformed op, and ``TypeError`` or
    ``ValueError`` for a version or delta that is not an int in range."""
    args = []
    for index, op in enumerate(ops):
        if not isinstance(op, (tuple, list)) or not op:
            raise ValueError("batch op %d must be a tuple: %s" % (index + 1, _BATCH_OPS))
        name = _to_bytes(op[0], "batch op name").upper()
        if name == b"PUT" and len(op) == 3:
            args += [b"PUT", op[1], op[2]]
        elif name in (b"DEL", b"DELETE") and len(op) == 2:
            args += [b"DEL", op[1]]
        elif name == b"IFVERSION" and len(op) == 3:
            args += [b"IFVERSION", op[1],
                     _check_version(op[2], "the version of batch op %d" % (index + 1))]
        elif name == b"INCR" and len(op) == 3:
            args += [b"INCR", op[1], _check_delta(op[2], "the delta of batch op %d" % (index + 1))]
        else:
            raise ValueError("batch op %d must be %s, got %r" % (index + 1, _BATCH_OPS, op))
    if not args:
        raise ValueError("a batch needs at least one op")
    return args


class _Commands(object):
    """The ActorKV commands. Subclasses define ``_call(transform, *args)``, which either runs
    the command and returns ``transform(reply)``, or queues it."""

    def _call(self, transform, *args):  # pragma: no cover - abstract
        raise NotImplementedError

    def execute_command(self, *args):
        """Sends any command, e.g. ``execute_command("GET", "ns", "k")``, and returns the raw
        reply (see :class:`ReplyParser` for the types). An error reply raises
        :class:`ServerError`."""
        return self._call(_identity, *args)

    def ping(self, message=None):
        """``PING [message]``: returns ``"PONG"``, or ``message`` echoed back as bytes."""
        if message is None:
            return self._call(_identity, "PING")
        return self._call(_identity, "PING", message)

    def put(self, namespace, key, value, if_version=None, *, ttl=None, ephemeral=False):
        """``PUT ns key value [PX ms] [EPHEMERAL] [IFVERSION v]``: stores ``value`` under
        ``key``; returns True.

        With ``if_version`` (an int, 0 to 2**63 - 1), ``PUT ns key value IFVERSION v``: stores
        the value only if the key's version is still ``if_version`` (as :meth:`getv` gave it;
        0: only if the key is absent). Returns the key's new version (an int), or None when
        the condition did not hold and nothing was written. ``TypeError``/``ValueError`` for
        an ``if_version`` that is not such an int, before anything is sent.

        With ``ttl`` (keyword only; seconds, an int or a float, more than 0), the key expires
        that long from now: sent as ``PX`` milliseconds (rounded to the nearest, at least 1).
        Once expired the key is gone for every read, and its deletion is logged (watchers see
        it). A put without ``ttl`` removes any expiry the key had. ``TypeError``/
        ``ValueError`` for a ``ttl`` that is not such a number, before anything is sent.

        With ``ephemeral=True`` (keyword only), the key belongs to this client's connection:
        the server deletes it when the connection closes, for whatever reason (:meth:`close`,
        the process exiting or being killed, the connection being lost), and at its own next
        start if it stopped first. A put without ``ephemeral`` makes the key persistent again,
        whoever owned it. (Note that this client reconnects by itself after a lost
        connection: keys it wrote as ephemeral before are gone by then.)

        The namespace is created by its first write. Raises :class:`ServerError` with code
        ``BADNS`` (invalid namespace name), ``BADKEY`` (empty or too long key) or ``TOOBIG``
        (a value over the server's ``--max-value-bytes``; the connection stays usable). A value
        over ``--max-bulk-bytes`` cannot even be read by the server: ``PROTO invalid bulk
        length: N bytes, over the limit of M (actorkvd --max-bulk-bytes)``, after which the
        server closes the connection (commands pipelined after it
        are not run). The client does not know the server's limits and checks no sizes.
        """
        args = ["PUT", namespace, key, value]
        if ttl is not None:
            args += ["PX", _ttl_milliseconds(ttl)]
        if ephemeral:
            args.append("EPHEMERAL")
        if if_version is None:
            return self._call(_is_ok, *args)
        return self._call(_new_version, *(args + ["IFVERSION", _check_version(if_version)]))

    def get(self, namespace, key):
        """``GET ns key``: returns the value as bytes, or None if the key (or namespace) does
        not exist."""
        return self._call(_identity, "GET", namespace, key)

    def getv(self, namespace, key):
        """``GETV ns key``: returns ``(value, version)``, the value as bytes and the key's
        version as an int (1 or more), or None if the key (or namespace) does not exist.

        The version is the number of the write that last changed the key; it only grows, so
        ``put(..., if_version=version)`` succeeds only if nobody wrote the key since.
        """
        return self._call(_versioned, "GETV", namespace, key)

    def incr(self, namespace, key, delta=1):
        """``INCR ns key delta``: adds ``delta`` (an int, default 1; negative counts down) to
        the integer stored under ``key`` (as ASCII decimal; an absent key counts as 0) and
        returns the new value, an int. Atomic: no read-modify-write loop is needed. The key
        keeps its deadline and owner (``pexpire``, ``ephemeral``), as Redis's INCR keeps a TTL.

        A stored value that is not a canonical signed 64-bit decimal raises
        :class:`ServerError` ``ERR value is not an integer``; a result outside the signed 64-bit
        range ``ERR increment or decrement would overflow``; nothing is written then.
        ``TypeError``/``ValueError`` for a ``delta`` that is not a signed 64-bit int, before
        anything is sent.
        """
        return self._call(_integer, "INCR", namespace, key, _check_delta(delta))

    def delete(self, namespace, *keys, if_version=None):
        """``DEL ns key [key ...]``: removes the keys; returns how many existed.

        With ``if_version`` (keyword only, exactly one key): removes the key only if its
        version is still ``if_version`` (``BATCH ns IFVERSION key v DEL key``) and returns
        True if the condition held, False if not (nothing removed). With ``if_version=0`` the
        condition holds when the key is absent, and there is nothing to remove.
        """
        if not keys:
            raise ValueError("delete needs at least one key")
        if if_version is None:
            return self._call(_identity, "DEL", namespace, *keys)
        if len(keys) != 1:
            raise ValueError("delete with if_version takes exactly one key, not %d" % len(keys))
        key = keys[0]
        return self._call(_batch_applied, "BATCH", namespace,
                          "IFVERSION", key, _check_version(if_version), "DEL", key)

    def pexpire(self, namespace, key, ms):
        """``PEXPIRE ns key ms``: makes the key expire ``ms`` milliseconds (an int) from now,
        keeping its value, version and owner (an expiry change is not a write: watchers do not
        see it). ``ms`` of 0 or less deletes the key now, as in Redis. Returns True if the key
        existed, False if not. ``TypeError``/``ValueError`` for an ``ms`` that is not a signed
        64-bit int, before anything is sent."""
        return self._call(_boolean, "PEXPIRE", namespace, key,
                          _check_int(ms, "ms", _INT64_MIN, _INT64_MAX))

    def persist(self, namespace, key):
        """``PERSIST ns key``: removes the key's expiry. Returns True if it had one, False if
        the key is absent or had none (Redis's rule)."""
        return self._call(_boolean, "PERSIST", namespace, key)

    def pttl(self, namespace, key):
        """``PTTL ns key``: the milliseconds the key has left (an int, 0 or more); -1 if it
        does not expire, -2 if it does not exist (Redis's convention)."""
        return self._call(_pttl, "PTTL", namespace, key)

    def pexpire_namespace(self, namespace, ms):
        """``PEXPIRE ns ms``: makes the whole namespace expire ``ms`` milliseconds (an int) from
        now, every key going then (Redis's ``EXPIRE`` of a hash); writes keep the deadline, the
        delete of the last key ends it. ``ms`` of 0 or less deletes every key now. Returns True
        if the namespace holds a key, False if not (nothing done). Refused (``ServerError``)
        through an agent of an etcd cluster."""
        return self._call(_boolean, "PEXPIRE", namespace, _check_int(ms, "ms", _INT64_MIN, _INT64_MAX))

    def persist_namespace(self, namespace):
        """``PERSIST ns``: removes the whole namespace's deadline. True if it had one."""
        return self._call(_boolean, "PERSIST", namespace)

    def pttl_namespace(self, namespace):
        """``PTTL ns``: the milliseconds the whole namespace has left (an int, 0 or more); -1 if
        it has no deadline, -2 if it holds no key."""
        return self._call(_pttl, "PTTL", namespace)

    def exists(self, namespace, *keys):
        """``EXISTS ns key [key ...]``: returns how many of the keys exist (a key named twice
        counts twice)."""
        if not keys:
            raise ValueError("exists needs at least one key")
        return self._call(_identity, "EXISTS", namespace, *keys)

    def count(self, namespace):
        """``COUNT ns``: returns the number of keys in the namespace (0 if it does not exist)."""
        return self._call(_identity, "COUNT", namespace)

    def memory_usage(self, namespace):
        """``MEMORY USAGE ns``: the bytes the namespace takes in the server's memory (an int), an
        estimate from its exact counts of keys, bytes and lifetimes; None when it holds no key.
        Refused (``ServerError``) through an agent of an etcd cluster; see protocol.md "MEMORY
        USAGE"."""
        return self._call(_optional_integer, "MEMORY", "USAGE", namespace)

    def scan_page(self, namespace, cursor=b"0", prefix=b"", count=100):
        """``SCAN ns cursor [PREFIX p] [COUNT n]``: returns one page as
        ``(next_cursor, [(key, value), ...])`` in key order.

        Start with cursor ``b"0"``; the scan is over when the returned cursor is ``b"0"``.
        ``count`` is at most 100000. Prefer :meth:`Client.scan`, which walks every page.
        """
        args = ["SCAN", namespace, cursor]
        if prefix:
            args += ["PREFIX", prefix]
        if count is not None:
            args += ["COUNT", int(count)]
        return self._call(_scan_page, *args)

    def batch(self, namespace, ops):
        """``BATCH ns PUT k v | DEL k | IFVERSION k v | INCR k delta ...``: applies the ops
        atomically, all or nothing.

        ``ops`` is a sequence of tuples (op names in any case):

        * ``("put", key, value)`` -- result True;
        * ``("del", key)`` -- result 1 or 0, whether the key existed at that point of the batch;
        * ``("ifversion", key, version)`` -- a guard: the batch applies only if the key's
          version is ``version`` (0: the key is absent) at that point of the batch (after the
          ops before it); result True;
        * ``("incr", key, delta)`` -- adds ``delta`` as :meth:`incr` does; result the new value.

        Returns the list of results, one per op; or None if a guard did not hold, and then
        nothing was applied. If any op is invalid (for example an empty key, or an incr of a
        value that is not an integer) the server raises :class:`ServerError` and applies none
        of them. ``ValueError`` (or ``TypeError`` for a version or delta that is not an int) for
        a malformed op list, before anything is sent. A batch larger than the server's
        ``--max-request-bytes`` is ``ServerError`` ``PROTO too big multibulk request: …``, and
        the server closes the connection.
        """
        # A batch over the server's --max-request-bytes (or --max-arguments) is refused with
        # PROTO ("too big multibulk request") and the connection closed, as for put.
        return self._call(_batch_results, "BATCH", namespace, *_batch_arguments(ops))

    def unlink(self, *namespaces):
        """``UNLINK ns [ns ...]``: removes the namespaces (their keys, files and places among
        the namespaces); returns how many of them existed. A name used again afterwards numbers
        its versions on after every one it had: a version read before guards nothing."""
        if not namespaces:
            raise ValueError("unlink needs at least one namespace")
        return self._call(_identity, "UNLINK", *namespaces)

    def rename(self, namespace, new_namespace, replace=True):
        """``RENAME ns newns`` (``RENAMENX`` with ``replace=False``): the namespace's keys, with
        their deadlines and its own, become ``new_namespace``'s, whose keys are dropped,
        atomically and durably; returns True, or False (nothing done) when not ``replace`` and
        ``new_namespace`` holds a key. A namespace that holds no key raises :class:`ServerError`
        ``ERR`` (``no such key``); see protocol.md "RENAME, RENAMENX"."""
        if replace:
            return self._call(_is_ok, "RENAME", namespace, new_namespace)
        return self._call(_integer, "RENAMENX", namespace, new_namespace) == 1

    def copy(self, namespace, new_namespace, replace=False):
        """``COPY ns newns`` (``REPLACE`` with ``replace=True``): ``new_namespace`` holds the
        namespace's keys, with their deadlines and its own, as of one moment, atomically and
        durably; the namespace is unchanged. Returns True, or False (nothing done) when the
        namespace holds no key or, without ``replace``, ``new_namespace`` holds one; see
        protocol.md "COPY"."""
        arguments = ("REPLACE",) if replace else ()
        return self._call(_integer, "COPY", namespace, new_namespace, *arguments) == 1

    def compact(self, namespace):
        """``COMPACT ns``: writes a snapshot of the namespace and trims its log; returns True."""
        return self._call(_is_ok, "COMPACT", namespace)

    def backup(self, path):
        """``BACKUP path``: the server writes every namespace, as of one moment, to the new
        directory ``path`` (its parent must exist), which ``actorkvd --data-dir`` serves as it is;
        returns the absolute path. A relative ``path`` is taken from this process's working
        directory (the server does not share it). Only the server's own uid may ask under
        ``--acl``. Waits up to the client's timeout: a large store may need ``timeout=None``.
        A bad path is a :class:`ServerError` ``ERR``; a namespace whose files are corrupt is left
        out and the error (``CORRUPT``) names it, the backup of the others being written."""
        if isinstance(path, (bytes, bytearray)):
            path = os.fsdecode(bytes(path))
        absolute = os.path.abspath(path)
        self._call(_is_ok, "BACKUP", absolute)
        return absolute

    def wait_durable(self, timeout_ms=0):
        """``WAITAOF 1 0 timeout_ms``: returns True once every write acknowledged so far (this
        client's and every other's) is fsync'd, the server fsyncing what is not yet, whatever
        its ``--fsync`` policy; False if ``timeout_ms`` (0: none) passed first. Under
        ``everysec`` or ``no``, call it after a write that must survive a power loss before
        this program goes on. Waits up to the client's own timeout too."""
        _check_int(timeout_ms, "timeout_ms", 0, 2**63 - 1)
        local, _ = self._call(_two_integers, "WAITAOF", 1, 0, timeout_ms)
        return local == 1

    def info(self):
        """``INFO``: returns the server's statistics as text (``key:value`` lines); see
        :func:`parse_info` and :meth:`info_dict`."""
        return self._call(_decode_text, "INFO")

    def info_dict(self):
        """``INFO`` parsed with :func:`parse_info`."""
        return self._call(lambda reply: parse_info(_decode_text(reply)), "INFO")

    def namespaces(self):
        """``NAMESPACES``: returns the names of the namespaces, as a list of str."""
        return self._call(_decode_list, "NAMESPACES")

    def client_id(self):
        """``CLIENT ID``: this connection's id (an int), as ``client_list()`` shows it."""
        return self._call(_identity, "CLIENT", "ID")

    def client_list(self):
        """``CLIENT LIST``: the server's open connections, as :func:`parse_client_list` reads
        them (``id``, ``name``, ``age``, ``idle``, ``cmd``, ``flags``, ``uid``, ``gid``, ``pid``,
        ...), in id order: a hung lock holder shows a growing ``idle`` (seconds since it last
        sent a request).
        Under ``--acl`` only the server's own uid may ask (``NOPERM`` otherwise)."""
        return self._call(lambda reply: parse_client_list(_decode_text(reply)), "CLIENT", "LIST")

    def kill_client(self, client_id):
        """``CLIENT KILL ID client_id``: closes that connection, which releases its ephemeral
        keys (a hung lock holder's locks) as any close does; returns True if it was open,
        False if no connection has that id. ``client_id`` is an int from 1; ``TypeError`` or
        ``ValueError`` otherwise, before anything is sent. Under ``--acl`` only the server's
        own uid may ask."""
        _check_int(client_id, "client_id", 1, _INT64_MAX)
        return self._call(lambda reply: reply == 1, "CLIENT", "KILL", "ID", client_id)


# --------------------------------------------------------------------------------------------
# The client


class Client(_Commands):
    """One connection to an ActorKV server.

    Args:
        path: the server's Unix socket. None (the default) means ``$ACTORKV_SOCKET`` when
            that is set and not empty, else :data:`DEFAULT_SOCKET` (``./actorkv.sock``), read
            when the client is created; a path given here is used whatever the environment says.
        timeout: seconds to wait to connect, and then how long a command (or a whole
            pipeline) may go without any progress -- no byte sent and none received --
            before :class:`ActorKVTimeoutError`; a large pipeline that keeps moving may take
            longer in total. None waits forever.
        connect: connect now (the default) rather than at the first command.

    Use it as a context manager to close the connection at the end. If the connection is
    lost, the failing call raises :class:`ActorKVConnectionError` and the next call connects
    again; but a call whose first send fails because the server had closed the idle connection
    (it restarted, say) took no byte of it, and is sent again, once, on a new connection.

    Not thread-safe: give each thread its own client. A call made while another thread's call
    on the same client is running raises ``RuntimeError`` (a non-blocking lock per call), so
    that replies never go to the wrong thread. Fork-safe: in a child of ``fork()`` the inherited
    connection is dropped at once (the child's descriptor closed, the parent's connection never
    shut down: a lock or ``EPHEMERAL`` key of the parent's goes when the parent does), and the
    first call connects again.
    """

    #: Bytes asked of the socket per read.
    read_size = 256 * 1024
    #: Small requests are joined into blocks of about this many bytes per send.
    send_size = 256 * 1024

    def __init__(self, path=None, timeout=10.0, connect=True):
        if path is None:
            path = os.environ.get("ACTORKV_SOCKET") or DEFAULT_SOCKET
        try:
            self.path = os.fspath(path)
        except TypeError:
            raise TypeError("path must be a str, bytes or os.PathLike socket path, not %s"
                            % type(path).__name__) from None
        if _check_timeout(timeout) == 0:
            raise ValueError("timeout must be None or more than 0 seconds, not %r" % (timeout,))
        self.timeout = timeout
        self._sock = None
        self._parser = None
        self._poller = None
        self._pid = os.getpid()  # the process the connection belongs to (see _begin)
        self._busy = threading.Lock()  # held during a call: two threads at once raise
        if connect:
            self.connect()

    # -- connection -------------------------------------------------------------------------

    def connect(self):
        """Opens the connection if it is not open. Raises :class:`ActorKVConnectionError`."""
        if self._pid != os.getpid():
            self._forget_inherited()
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.path)
        except socket.timeout:
            sock.close()
            raise ActorKVTimeoutError("timed out connecting to %s" % self.path)
        except OSError as error:
            sock.close()
            raise ActorKVConnectionError("cannot connect to ActorKV at %s: %s"
                                         % (self.path, error.strerror or error))
        sock.setblocking(False)  # from now on, _roundtrip waits with poll/select
        self._sock = sock
        _CONNECTED_CLIENTS.add(self)
        self._parser = ReplyParser()
        self._poller = select.poll() if _HAVE_POLL else None

    @property
    def connected(self):
        """True while a connection is open."""
        return self._sock is not None

    def close(self):
        """Closes the connection (without QUIT). Safe to call more than once."""
        sock, self._sock, self._parser, self._poller = self._sock, None, None, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def quit(self):
        """Sends ``QUIT``, waits for its ``+OK`` and closes the connection."""
        try:
            if self._sock is not None:
                self._call(_is_ok, "QUIT")
        finally:
            self.close()

    def shutdown(self):
        """``SHUTDOWN``: the server stops as on SIGTERM (the requests in flight finished, every
        namespace fsync'd, its socket removed) and closes this connection, with no reply, once it
        has; returns None then, the client closed. Waits up to the client's timeout
        (:class:`ActorKVTimeoutError`). A server that cannot be reached raises
        :class:`ActorKVConnectionError` as any call does; under ``--acl`` only the server's own
        uid may ask (:class:`PermissionDeniedError`, nothing done); a shutdown that could not
        make every namespace durable raises its :class:`ServerError` (``IOERR``)."""
        self.connect()  # so that "cannot connect" is not taken for the server's closing
        try:
            reply = self._call(_identity, "SHUTDOWN")
        except ActorKVTimeoutError:
            raise
        except ServerError:
            raise
        except ActorKVConnectionError:
            self.close()
            return None
        raise ProtocolError("unexpected reply to SHUTDOWN (it has none): %r" % (reply,))

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<actorkv.Client path=%r %s>" % (self.path, "connected" if self._sock else "closed")

    # -- I/O ----------------------------------------------------------------------------------

    def _wait(self, want_write, seconds):
        """Waits until the socket is readable (or, with ``want_write``, writable) or broken, or
        until ``seconds`` pass (None: forever). Returns (readable, writable); both False on
        timeout. A hang-up or error counts as both, so that the next send/recv reports it."""
        sock = self._sock
        poller = self._poller
        if poller is not None:
            events = select.POLLIN | (select.POLLOUT if want_write else 0)
            poller.register(sock, events)
            ready = poller.poll(None if seconds is None else max(0.0, seconds * 1000.0))
            if not ready:
                return False, False
            revents = 0
            for _, event in ready:
                revents |= event
            broken = revents & (select.POLLERR | select.POLLHUP | select.POLLNVAL)
            return bool(revents & select.POLLIN or broken), bool(revents & select.POLLOUT or broken)
        readable, writable, broken = select.select(
            [sock], [sock] if want_write else [], [sock], seconds)
        return bool(readable or broken), bool(writable or broken)

    def _begin(self):
        """Starts a call on this connection: takes the cheap guard against a second thread
        (``RuntimeError`` rather than replies crossed between threads), and in a process
        forked after the connection was made, abandons the inherited socket (closing this
        process's descriptor, never shutting the connection down: it is the parent's) so that
        the call connects again. The caller calls :meth:`_end` afterwards."""
        if self._pid != os.getpid():
            self._forget_inherited()
        if not self._busy.acquire(False):
            raise RuntimeError(
                "this actorkv.Client is used from two threads at once (a Client is one "
                "connection and is not thread-safe: give each thread its own Client)")

    def _end(self):
        self._busy.release()

    def _forget_inherited(self):
        """In a child of fork(): drops the connection inherited from the parent. Its socket is
        closed in this process only (the parent's descriptor, and so its connection, stays as
        it is; never shut down, which would cut the parent off), and the guard against two
        threads is new (a thread of the parent may have held it at the fork)."""
        self._busy = threading.Lock()
        self._pid = os.getpid()
        self.close()

    def _roundtrip(self, requests, count):
        """Sends encoded requests and returns their ``count`` raw replies, in order (an error
        reply is returned as a :class:`ServerError`, not raised).

        ``requests`` is one bytes-like object, or an iterable of them (taken lazily). Sending
        and receiving overlap: replies are read and parsed while requests are still being
        sent, since the server stops reading a client's requests while about
        ``--max-output-bytes`` of its replies are unread; sending everything first would
        deadlock on a large pipeline. ``self.timeout`` bounds the time without progress
        (nothing sent and nothing received), not the whole exchange.

        On a connection opened before this call, a first send that fails with EPIPE,
        ECONNRESET or ENOTCONN (the server restarted, or closed the idle connection) accepted
        no byte of the requests: they are sent again, once, on a new connection.

        After a connection-fatal error reply (PROTO, MAXCLIENTS, NOPERM refusing the
        connection on accept: :func:`_closes_connection`) the remaining replies are
        :class:`ActorKVConnectionError` instances and the connection is closed; a command's
        NOPERM is a reply like any other. A timeout, a lost connection or a malformed reply
        closes the connection and raises; the error's ``replies`` attribute holds the replies
        received before it, in order.
        """
        self._begin()
        try:
            if isinstance(requests, (bytes, bytearray, memoryview)):
                requests = (requests,)
            chunks = iter(requests)
            try:
                return self._exchange(chunks, count, self._sock is not None)
            except _NothingSent as unsent:
                return self._exchange(itertools.chain((unsent.block,), chunks), count, False)
        finally:
            self._end()

    def _exchange(self, chunks, count, may_retry):
        """The body of :meth:`_roundtrip`: raises :class:`_NothingSent` (the connection
        closed) when ``may_retry`` and the first send failed before any byte was accepted."""
        self.connect()
        sock, parser = self._sock, self._parser
        timeout = self.timeout
        replies = []
        pending = memoryview(b"")  # the block being sent, from the first unsent byte
        sending = True
        sent_any = False  # some byte of the requests was accepted by the socket
        send_error = None
        can_write = True  # try to send before waiting: a new request usually fits at once
        can_read = False
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                progress = False
                if sending and can_write:
                    try:
                        while True:
                            if not pending:
                                pending = memoryview(_next_block(chunks, self.send_size))
                                if not pending:
                                    sending = False
                                    break
                            sent = sock.send(pending)
                            if sent:
                                sent_any = True
                            pending = pending[sent:]
                            progress = True
                    except BlockingIOError:
                        pass
                    except OSError as error:
                        if (may_retry and not sent_any and error.errno in _UNSENT_ERRNOS
                                and not self._drain_refusal()):
                            # The connection was dead before this request (a server restart,
                            # say): the socket took none of it, so sending it again is safe.
                            raise _NothingSent(pending)
                        # The server closed the connection, maybe after an error reply that
                        # explains why (PROTO, MAXCLIENTS, NOPERM): read what it sent.
                        sending = False
                        send_error = error
                        pending = memoryview(b"")
                if can_read:
                    try:
                        data = sock.recv(self.read_size)
                    except BlockingIOError:
                        data = None
                    except OSError as error:
                        raise self._lost(error, send_error, sent_any, count, len(replies))
                    if data is not None:
                        if not data:
                            raise self._lost(None, send_error, sent_any, count, len(replies))
                        progress = True
                        parser.feed(data)  # a ProtocolError closes the connection below
                while len(replies) < count:
                    reply = parser.gets()
                    if reply is NOT_READY:
                        break
                    replies.append(reply)
                    if isinstance(reply, ServerError) and _closes_connection(reply):
                        self.close()
                        while len(replies) < count:
                            replies.append(ActorKVConnectionError(
                                "connection closed by the server after an earlier "
                                "error; not run"))
                        return replies
                if len(replies) == count and not sending:
                    return replies
                if timeout is not None:
                    now = time.monotonic()
                    if progress:
                        deadline = now + timeout
                    elif now >= deadline:
                        raise ActorKVTimeoutError((
                            "timed out sending to %s" if sending
                            else "timed out waiting for a reply from %s") % self.path
                            + _maybe_applied(sent_any, count, len(replies)))
                    remaining = deadline - now
                else:
                    remaining = None
                can_read, can_write = self._wait(sending, remaining)
        except ActorKVError as error:
            self.close()
            error.replies = replies
            raise
        except BaseException:
            # Whatever went wrong (a timeout, a lost connection, a malformed reply, even
            # KeyboardInterrupt), replies still on their way would be taken for the answers to
            # the next commands: this connection is done.
            self.close()
            raise

    def _drain_refusal(self):
        """After a failed first send: reads what the server sent before closing (without
        waiting) into the parser. True if it holds an error reply after which the server
        closes connections (``MAXCLIENTS``, a refusal on accept, ...): that is the answer,
        not a reason to send again."""
        parser = self._parser
        while True:
            try:
                data = self._sock.recv(self.read_size)
            except OSError:  # BlockingIOError included: nothing (more) buffered
                break
            if not data:
                break
            try:
                parser.feed(data)
            except ProtocolError:
                return False
        return any(isinstance(reply, ServerError) and _closes_connection(reply)
                   for reply in parser._replies)

    def _lost(self, error, send_error, sent_any, count, received):
        """The error to raise when the connection ended (``error`` from recv, None for end of
        file) before every reply came; a failed send is the better explanation. The message
        says whether the requests may have been applied."""
        if send_error is not None:
            error = send_error
        if error is None:
            text = "connection to %s closed by the server" % self.path
        else:
            text = "connection to %s lost%s: %s" % (
                self.path, " while sending" if send_error is not None else "",
                error.strerror or error)
        return ActorKVConnectionError(text + _maybe_applied(sent_any, count, received))

    def _call(self, transform, *args):
        reply = self._roundtrip(encode_command(*args), 1)[0]
        if isinstance(reply, Exception):
            raise reply
        return transform(reply)

    # -- helpers beyond single commands ---------------------------------------------------------

    def scan(self, namespace, prefix=b"", count=100):
        """Yields every ``(key, value)`` of the namespace whose key starts with ``prefix``, in
        key order, fetching pages of up to ``count`` entries as it goes.

        Other commands may be sent on the same client between items. A key that exists for
        the whole scan is yielded exactly once, whatever is written meanwhile.
        """
        cursor = b"0"
        while True:
            cursor, entries = self.scan_page(namespace, cursor, prefix=prefix, count=count)
            for entry in entries:
                yield entry
            if cursor == b"0":
                return

    def update(self, namespace, key, fn, max_attempts=100):
        """Read-modify-write of one key without lost updates: reads the value and its version
        (:meth:`getv`), computes ``new = fn(old)`` (``old`` is the value as bytes, or None if
        the key is absent) and writes ``new`` only if nobody wrote the key in between
        (``PUT ... IFVERSION``; when ``new`` is None, a conditional delete). If someone did,
        it reads again and calls ``fn`` again, up to ``max_attempts`` times in all.

        ``new`` may be anything :meth:`put` takes (str, bytes, int, ...). Returns the value
        written, as bytes, or None if the key was deleted (or was absent and ``fn`` returned
        None: then nothing is written). ``fn`` may be called more than once, so it should have
        no other effects; an exception from it propagates, nothing written. The write is a
        PUT, so it replaces any deadline or owner the key had (:meth:`incr` keeps them).

        After a conflict it waits a short random time before the next attempt (at most 0.5 ms
        after the first, doubling up to 50 ms), so that processes racing for one key do not
        keep colliding, and one of them is not starved by the others.

        Raises :class:`ConflictError` when every attempt found the key written by someone
        else (nothing was written by this call). For a counter, :meth:`incr` needs no retries.
        """
        _check_int(max_attempts, "max_attempts", 1, _INT64_MAX)
        backoff, most = _UPDATE_BACKOFF
        for attempt in range(max_attempts):
            if attempt:
                time.sleep(random.uniform(0.0, backoff))
                backoff = min(backoff * 2.0, most)
            current = self.getv(namespace, key)
            old, version = current if current is not None else (None, 0)
            new = fn(old)
            if new is None:
                if version == 0 or self.delete(namespace, key, if_version=version):
                    return None
            else:
                new = _to_bytes(new, "the value fn returned")
                if self.put(namespace, key, new, if_version=version) is not None:
                    return new
        raise ConflictError("the key %r in namespace %r was written by others %s" % (
            _to_bytes(key), _decode_text(_to_bytes(namespace)),
            "on each of %d attempts" % max_attempts if max_attempts != 1
            else "during its only attempt (max_attempts=1)"))

    def pipeline(self):
        """Returns a :class:`Pipeline` that queues commands and sends them together."""
        return Pipeline(self)

    def changes(self, namespace, prefix=None, from_seq=None, snapshot=False,
                reconnect_timeout=60.0):
        """``CHANGES ns [PREFIX p] [FROM seq | SNAPSHOT]``: follows the namespace's changes.

        Returns a :class:`ChangeFeed`, an iterator of events: :class:`Change` (one per applied
        write: PUT, INCR, DEL, a whole BATCH), :class:`Snapshot` (with ``snapshot``,
        first: every key under the prefix as of one sequence) and :class:`Synced` (caught up
        with the live log). The feed has its own connection to the server (this client's
        connection is not used); close it (``close()`` or ``with``) when done.

        Args:
            prefix: only keys that start with it (str or bytes; None or empty: all keys).
            from_seq: resume after this sequence (an int from 0): every change after it
                that the server still holds, then live ones. Without it (and without
                ``snapshot``), the changes after the current last one.
            snapshot: first the current keys, then the changes after them.
            reconnect_timeout: when the connection is lost (the server restarts or is
                killed, or sends ``-LAGGING``), the feed connects again and resumes after the
                last change it delivered, so that no change is missed or seen twice. It tries
                within each call's own timeout (``next_event(t)`` returns None when ``t`` runs
                out and the next call goes on trying), and raises
                :class:`ActorKVConnectionError` once its attempts have failed for this many
                seconds in a row (None: forever, 0: never reconnect).

        The first CHANGES is sent now: a refused one (a bad argument, a ``from_seq`` after
        the namespace's last sequence, ...) raises :class:`ServerError` here, and a
        ``from_seq`` older than the history the server keeps raises :class:`CompactedError`.
        Without the right to read the namespace (``actorkvd --acl``) it raises
        :class:`PermissionDeniedError` here, and a feed whose right a reload of the server's
        rules withdraws raises it from the iteration, after the changes sent before (it does
        not resume). ``ValueError``/``TypeError`` for arguments that are wrong before anything
        is sent.
        """
        return ChangeFeed(self.path, namespace, prefix=prefix, from_seq=from_seq,
                          snapshot=snapshot, timeout=self.timeout,
                          reconnect_timeout=reconnect_timeout)

    def mirror(self, namespace, prefix=None, wait=True, reconnect_timeout=60.0):
        """Returns a :class:`Mirror`: a local dict of the namespace's keys (under ``prefix``)
        kept current by following its changes (``CHANGES ns SNAPSHOT``, on its own
        connection). With ``wait`` (the default) it returns once the dict holds the current
        state (:meth:`Mirror.wait_synced`). ``reconnect_timeout`` is that of :meth:`changes`;
        where :meth:`changes` would raise :class:`CompactedError` on resuming, the mirror
        takes a new snapshot instead.
        """
        mirror = Mirror(self.path, namespace, prefix=prefix, timeout=self.timeout,
                        reconnect_timeout=reconnect_timeout)
        if wait:
            try:
                mirror.wait_synced()
            except BaseException:
                mirror.close()
                raise
        return mirror


    def lock(self, namespace, key, timeout=None, ttl=None, owner=None):
        """Returns a :class:`Lock` on ``key`` of ``namespace`` (not yet acquired): a lock
        shared by every client of the server, held on a connection of its own and released
        by the server if that connection closes (the holder exits, crashes or is killed)::

            with kv.lock("locks", "job-42", timeout=10) as lock:
                ...                     # nobody else holds locks/job-42 meanwhile
                lock.token              # the fencing token: larger for each new holder

        Args:
            timeout: seconds :meth:`Lock.acquire` (and ``with``) waits for the lock before
                raising :class:`LockTimeout` (None: as long as it takes; 0: one try).
            ttl: seconds after which the server releases the lock even if its holder is
                still connected (None: only when released or disconnected).
            owner: the value stored under the key while the lock is held, saying who holds
                it (default ``host:pid``).

        ``TypeError``/``ValueError`` for arguments that are wrong, before anything is sent.
        See :class:`Lock`.
        """
        return Lock(self.path, namespace, key, timeout=timeout, ttl=ttl, owner=owner,
                    io_timeout=self.timeout)


def _taking(items):
    """Yields the items of a list, dropping each from the list as it goes (so that encoded
    requests already sent can be freed while a large pipeline is still running)."""
    for index in range(len(items)):
        item = items[index]
        items[index] = None
        yield item


class Pipeline(_Commands):
    """Queues commands and sends them together; :meth:`execute` returns every reply in order.
    The methods are those of :class:`Client` (except ``scan``, use ``scan_page``, and
    ``update``, which needs each reply before its next command), each returning the pipeline
    so that calls can be chained::

        with client.pipeline() as p:
            p.put("ns", "a", "1").put("ns", "b", "2")
            p.get("ns", "a")
            results = p.execute()        # [True, True, b'1']

    Commands are not atomic as a group (use :meth:`Client.batch` for that), but they run in
    order and their replies come back in order. A pipeline may be of any size: replies are
    read while the commands are being sent (the server stops reading a client's commands
    while about a MiB of its replies are unread). Leaving the ``with`` block discards commands
    that were not executed.
    """

    def __init__(self, client):
        self.client = client
        self._queue = []

    def _call(self, transform, *args):
        self._queue.append((transform, encode_command(*args)))
        return self

    def __len__(self):
        """The number of commands queued."""
        return len(self._queue)

    def reset(self):
        """Discards the queued commands."""
        self._queue = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.reset()

    @staticmethod
    def _results(transforms, replies):
        results = []
        for transform, reply in zip(transforms, replies):
            if not isinstance(reply, Exception):
                try:
                    reply = transform(reply)
                except ProtocolError as error:
                    reply = error
            results.append(reply)
        return results

    def execute(self, raise_on_error=True):
        """Sends the queued commands and returns their results, in order; empties the queue.

        With ``raise_on_error`` (the default) the first error reply is raised as
        :class:`ServerError` after every reply has been read (so the connection stays in step);
        otherwise each failed command's place in the list holds its exception.

        If the connection is lost (or times out, or a reply is malformed) before every reply
        came, it raises that :class:`ActorKVConnectionError` (or :class:`ProtocolError`)
        whatever ``raise_on_error`` says, and the error's ``replies`` attribute is the list of
        the results received before it, in order (those commands were applied, or failed, as
        their results say); the commands after them may or may not have been applied.
        """
        queue, self._queue = self._queue, []
        if not queue:
            return []
        transforms = [transform for transform, _ in queue]
        payloads = [payload for _, payload in queue]
        del queue
        try:
            replies = self.client._roundtrip(_taking(payloads), len(payloads))
        except ActorKVError as error:
            # Cut off (the connection lost, a timeout, a malformed reply): the replies that
            # came before go with the error, as results.
            error.replies = self._results(transforms, getattr(error, "replies", None) or [])
            raise
        results = self._results(transforms, replies)
        if raise_on_error:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return results


# --------------------------------------------------------------------------------------------
# Following changes (CHANGES)


class Change(collections.namedtuple("Change", "namespace seq items")):
    """One change of a namespace, as a :class:`ChangeFeed` delivers it: the keys one applied
    write (a PUT, an INCR, a DEL, a whole BATCH) set or deleted. (The server also sends a DEL
    of keys that did not exist, as deletes: it took a sequence number too.)

    Attributes:
        namespace: the namespace's name (str).
        seq: the change's sequence number (int), the version it gave those keys. Numbers only
            grow, but may skip: ``PEXPIRE``/``PERSIST`` take a number without a change message,
            and with a prefix the changes that touch no key under it are left out. Never
            check ``seq == last + 1``.
        items: a list of ``(key, value)``, in the order the write gave them: the key as bytes,
            the new value as bytes, or None for a deleted key. A BATCH that writes a key
            twice lists it twice (apply the items in order). With a prefix, only the keys
            under it.
    """

    __slots__ = ()


class Snapshot(collections.namedtuple("Snapshot", "namespace seq items")):
    """The keys of a namespace (under the feed's prefix) as they were at sequence ``seq``: the
    first event of a feed that asked for a snapshot. The changes after ``seq`` follow.

    Attributes:
        namespace: the namespace's name (str).
        seq: the sequence the keys are at (int; 0 for a namespace never written).
        items: a list of ``(key, value)`` (bytes, bytes) in key order; empty if there are no
            keys. The server sends a large snapshot in several messages; the feed joins them
            into this one event, so it never delivers half a snapshot.
    """

    __slots__ = ()


class Synced(collections.namedtuple("Synced", "namespace seq")):
    """The feed has caught up: every change up to ``seq`` has been delivered (or, with a
    prefix, passed over), and the events that follow are live changes. Whoever applied the
    events so far holds the namespace's current state (as of ``seq``).

    A feed delivers one after it starts, and one more after each time it resumes (reconnects).

    Attributes:
        namespace: the namespace's name (str).
        seq: the last sequence sent or passed over (int).
    """

    __slots__ = ()


#: Seconds a :class:`ChangeFeed` waits before connecting again after a failed attempt: the
#: first bound, doubled after each further failure up to the second (random below the bound).
_RECONNECT_BACKOFF = (0.05, 2.0)

#: Error codes a change feed answers by connecting again and resuming: the server dropped a
#: follower that fell behind (``LAGGING``), is shutting down, has no room for a connection, or
#: (cluster mode) lost etcd or cannot reach it yet (``UNAVAILABLE``).
#: Not ``NOPERM``: a feed refused the right to read its namespace would be refused again.
_RESUME_CODES = frozenset({"LAGGING", "SHUTDOWN", "MAXCLIENTS", "UNAVAILABLE"})

#: ``-ERR FROM sequence 9 is after the last sequence of namespace 'config' (6)``: the server
#: never wrote the changes the feed has seen (its data directory was replaced, say).
_SEQUENCE_AHEAD = re.compile(r"^FROM sequence \d+ is after the last sequence")


class ChangeFeed(object):
    """Follows a namespace's changes (``CHANGES``) on a connection of its own: an iterator of
    :class:`Snapshot`, :class:`Change` and :class:`Synced` events, made by
    :meth:`Client.changes`::

        with kv.changes("config", snapshot=True) as feed:
            for event in feed:
                if isinstance(event, Snapshot):
                    state = dict(event.items)
                elif isinstance(event, Change):
                    for key, value in event.items:
                        if value is None:
                            state.pop(key, None)
                        else:
                            state[key] = value
                else:  # Synced: state is the namespace's current state
                    print("up to date at", event.seq)

    Every change comes once, in order, and only once it is as durable as the server's
    ``--fsync`` promises. When the connection is lost (the server restarts, is killed, or
    drops this follower with ``-LAGGING`` because it read too slowly), the feed connects again
    -- at once, then after waits that grow to 2 s -- and sends ``CHANGES ... FROM seq``, where
    ``seq`` is the last change (or snapshot) it delivered: the caller sees no gap and no
    change twice, only a second :class:`Synced` once the feed has caught up again. It tries
    only within the time each call allows (:meth:`next_event`'s ``timeout``; a ``poll`` makes
    at most the attempt that is due) and goes on at the next call; once its attempts have
    failed for ``reconnect_timeout`` seconds in a row it raises
    :class:`ActorKVConnectionError`; if the server no longer holds the changes it needs, it
    raises :class:`CompactedError`, and if the server has not written the changes it has seen
    (its data directory was replaced), the :class:`ServerError` it answers (with
    ``resnapshot``, in both cases it follows again with ``SNAPSHOT`` instead and delivers a
    new :class:`Snapshot`, which replaces all earlier state). A snapshot cut off by a lost
    connection is asked for again, whole. A feed that may not read the namespace
    (``-NOPERM``, under ``actorkvd --acl``: refused, or cut off by a reload of the server's
    rules) raises :class:`PermissionDeniedError` and does not resume: the right would still be
    missing.

    Any exception from the feed (other than its own ``ValueError``/``TypeError``) closes it.
    Close it with :meth:`close` or a ``with`` block: that closes its connection. :meth:`close`
    may be called from another thread, which ends a ``for`` loop waiting in this one.

    Attributes:
        namespace: the namespace followed (str).
        prefix: the key prefix (bytes), or None.
        seq: the sequence of the last event delivered or about to be (the feed resumes after
            it); before a requested snapshot has come, None.
        start_seq: the sequence in the first ``changes`` header: the changes delivered are
            those after it (after the snapshot, with ``snapshot``).
        reconnects: how many times the feed has resumed on a new connection.
    """

    def __init__(self, path, namespace, prefix=None, from_seq=None, snapshot=False,
                 timeout=10.0, reconnect_timeout=60.0, resnapshot=False):
        """See :meth:`Client.changes` for the arguments; ``path`` is the server's socket and
        ``timeout`` bounds connecting and waiting for the ``changes`` header (the stream
        itself may be idle for any time)."""
        if from_seq is not None:
            _check_int(from_seq, "from_seq", 0, _INT64_MAX)
            if snapshot:
                raise ValueError("from_seq and snapshot cannot be combined")
        if reconnect_timeout is not None and not reconnect_timeout >= 0:
            raise ValueError("reconnect_timeout must be None or 0 or more, not %r"
                             % (reconnect_timeout,))
        self.path = path
        self._ns = _to_bytes(namespace, "namespace")
        self.namespace = _decode_text(self._ns)
        self.prefix = _to_bytes(prefix, "prefix") if prefix else None
        self.reconnect_timeout = reconnect_timeout
        self.seq = from_seq
        self.start_seq = None
        self.reconnects = 0
        self._resnapshot = resnapshot
        self._want_snapshot = bool(snapshot)  # a snapshot is owed to the caller
        self._snapshot = None  # (seq, items) while a snapshot's messages are arriving
        self._events = collections.deque()  # received, not yet delivered
        self._io_timeout = timeout
        self._client = Client(path, timeout=timeout, connect=False)
        # While the connection is lost: when it was lost (time.monotonic()), why (the last
        # failure), when the next attempt is due and the wait after a failed one.
        self._lost_at = None
        self._lost_cause = None
        self._retry_at = 0.0
        self._retry_delay = _RECONNECT_BACKOFF[0]
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._reading = False  # a thread is in next_event
        try:
            self._follow()
        except BaseException:
            self._closed.set()
            self._client.close()
            raise

    # -- the stream ----------------------------------------------------------------------------

    def next_event(self, timeout=None):
        """Returns the next event, waiting for it up to ``timeout`` seconds (None: as long as
        it takes; 0: only what has already arrived). Returns None if no event came in that
        time, or once the feed is closed.

        When the connection is lost, it connects again and resumes within the same
        ``timeout``: if the server cannot be reached before it runs out, it returns None and
        the feed stays open, and the next call goes on trying (at once the first time, then
        after waits growing to 2 s: a call made before the next attempt is due only waits).
        Only after ``reconnect_timeout`` seconds of failed attempts in a row does it raise
        :class:`ActorKVConnectionError` (and the feed is closed). One attempt may outlast a
        short ``timeout`` by up to a quarter of a second, if the server accepts the
        connection but is slow to answer it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._reading:
                raise RuntimeError("ChangeFeed.next_event is already running in another thread")
            self._reading = True
        try:
            while not self._events:
                if self._closed.is_set():
                    return None
                if self._lost_at is not None:
                    if not self._resume(deadline):
                        return None  # still lost; the next call goes on trying
                    continue
                try:
                    message = self._receive(deadline)
                except ActorKVConnectionError as error:
                    self._lose(error)
                    continue
                if message is NOT_READY:
                    return None
                if isinstance(message, ServerError):
                    if message.code in _RESUME_CODES:
                        self._lose(message)
                        continue
                    # Anything else ends the feed: a PermissionDeniedError (the read right
                    # withdrawn by a reload; the server closes the connection) among them.
                    raise message
                self._handle(message)
            return self._events.popleft()
        except BaseException:
            self._closed.set()
            raise
        finally:
            with self._lock:
                self._reading = False
                if self._closed.is_set():
                    self._client.close()

    def __iter__(self):
        return self

    def __next__(self):
        event = self.next_event()
        if event is None:
            raise StopIteration
        return event

    # -- closing -------------------------------------------------------------------------------

    @property
    def closed(self):
        """True once the feed is closed (by :meth:`close` or by an exception)."""
        return self._closed.is_set()

    def close(self):
        """Stops following and closes the connection. Safe to call more than once, and from
        another thread while one waits in :meth:`next_event` (which then returns None, ending
        its ``for`` loop)."""
        with self._lock:
            self._closed.set()
            if self._reading:
                # Wake the reading thread (poll sees the hang-up); it closes the socket itself,
                # so that its descriptor is not closed under it.
                sock = self._client._sock
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        try:
            self._client.close()
        except Exception:
            pass

    def __repr__(self):
        return "<actorkv.ChangeFeed namespace=%r prefix=%r seq=%r %s>" % (
            self.namespace, self.prefix, self.seq, "closed" if self.closed else "open")

    # -- internals -----------------------------------------------------------------------------

    def _follow(self, deadline=None):
        """Connects and sends CHANGES: with SNAPSHOT while a snapshot is owed to the caller,
        else FROM the last sequence delivered (nothing the first time without ``from_seq``);
        reads the ``changes`` header. An error reply is raised. With a ``deadline``
        (time.monotonic()), connecting and the header get the time left until it, but at
        least a quarter of a second (and at most the feed's ``timeout``)."""
        args = ["CHANGES", self._ns]
        if self.prefix:
            args += ["PREFIX", self.prefix]
        if self._want_snapshot:
            args.append("SNAPSHOT")
        elif self.seq is not None:
            args += ["FROM", self.seq]
        self._client.close()
        self._snapshot = None
        timeout = self._io_timeout
        if deadline is not None:
            left = max(deadline - time.monotonic(), 0.25)
            timeout = left if timeout is None else min(timeout, left)
        self._client.timeout = timeout
        try:
            reply = self._client._roundtrip(encode_command(*args), 1)[0]
        finally:
            self._client.timeout = self._io_timeout
        if isinstance(reply, Exception):
            self._client.close()
            raise reply
        seq, _ = self._fields(reply, b"changes", 3)
        if self.start_seq is None:
            self.start_seq = seq
        if not self._want_snapshot:
            # FROM 0 (nothing seen yet) starts where the namespace's life began, which a
            # name used again after a removal numbers after the removal's change.
            if self.seq is not None and seq != self.seq and self.seq != 0:
                self._client.close()
                raise ProtocolError("CHANGES ... FROM %d answered with changes after %d"
                                    % (self.seq, seq))
            self.seq = seq

    def _receive(self, deadline):
        """The next message of the stream: a list, a :class:`ServerError`, or NOT_READY if
        ``deadline`` passed first. Raises :class:`ActorKVConnectionError` (having closed the
        connection) when it is lost or the feed was closed meanwhile."""
        client = self._client
        parser = client._parser
        if parser is None:
            raise ActorKVConnectionError("not connected to %s" % self.path)
        while True:
            message = parser.gets()
            if message is not NOT_READY:
                return message
            if self._closed.is_set():
                raise ActorKVConnectionError("change feed closed")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _ = client._wait(False, remaining)
            if not readable:
                if deadline is not None and time.monotonic() >= deadline:
                    return NOT_READY
                continue
            try:
                data = client._sock.recv(client.read_size)
            except BlockingIOError:
                continue
            except OSError as error:
                client.close()
                raise ActorKVConnectionError("connection to %s lost: %s"
                                             % (self.path, error.strerror or error))
            if not data:
                client.close()
                raise ActorKVConnectionError("connection to %s closed by the server" % self.path)
            try:
                parser.feed(data)
            except ProtocolError:
                client.close()
                raise

    def _lose(self, cause):
        """The connection was lost (``cause``: the error, or a ``-LAGGING`` reply): closes it
        and notes when, so that :meth:`_resume` connects again (at once, the first time).
        With ``reconnect_timeout`` 0, raises ``cause`` instead."""
        self._client.close()
        if self._closed.is_set():
            return
        if self.reconnect_timeout == 0:
            raise cause
        self._lost_at = time.monotonic()
        self._lost_cause = cause
        self._retry_at = self._lost_at
        self._retry_delay = _RECONNECT_BACKOFF[0]

    def _resume(self, deadline):
        """While the connection is lost: connects again and follows from where the feed
        stopped, trying when an attempt is due (at once, then after waits that grow to 2 s),
        until ``deadline`` (time.monotonic(); None: no limit). Returns True once resumed (or
        if the feed is closed meanwhile), False if ``deadline`` passed first: the feed is still
        lost and a later call goes on. Raises :class:`ActorKVConnectionError` once the
        attempts have failed for ``reconnect_timeout`` seconds in a row since the loss."""
        while True:
            if self._closed.is_set():
                return True
            now = time.monotonic()
            if now >= self._retry_at:
                try:
                    self._follow(deadline)
                    self.reconnects += 1
                    self._lost_at = None
                    self._lost_cause = None
                    return True
                except ServerError as error:
                    if isinstance(error, CompactedError) or (
                            error.code == "ERR" and _SEQUENCE_AHEAD.match(error.message)):
                        if self._resnapshot and not self._want_snapshot:
                            self._want_snapshot = True
                            self.seq = None
                            continue
                        raise
                    if error.code not in _RESUME_CODES:
                        raise
                    self._lost_cause = error
                except ActorKVConnectionError as error:
                    self._lost_cause = error
                if self._closed.is_set():
                    return True
                now = time.monotonic()
                waited = now - self._lost_at
                if self.reconnect_timeout is not None and waited >= self.reconnect_timeout:
                    raise ActorKVConnectionError(
                        "lost the changes of namespace %r at sequence %s and could not resume "
                        "within %g s: %s" % (self.namespace, self.seq, self.reconnect_timeout,
                                             self._lost_cause))
                delay = self._retry_delay
                pause = random.uniform(delay / 2.0, delay)
                if self.reconnect_timeout is not None:
                    pause = min(pause, self.reconnect_timeout - waited)
                self._retry_at = now + pause
                self._retry_delay = min(delay * 2.0, _RECONNECT_BACKOFF[1])
            if deadline is not None and now >= deadline:
                return False
            until = self._retry_at if deadline is None else min(self._retry_at, deadline)
            if self._closed.wait(max(0.0, until - now)):
                return True

    def _fields(self, message, kind, length):
        """Checks a ``kind`` message of ``length`` elements for this namespace; returns its
        sequence and, for ``snapshot``/``change``, its ``(key, value)`` list."""
        if not isinstance(message, list) or len(message) != length or message[0] != kind \
                or message[1] != self._ns or not isinstance(message[2], int) or message[2] < 0:
            raise ProtocolError("unexpected message %r on a change feed of namespace %r"
                                % (message, self.namespace))
        if length == 3:
            return message[2], None
        flat = message[3]
        if not isinstance(flat, list) or len(flat) % 2 or not all(
                isinstance(flat[i], bytes) and (isinstance(flat[i + 1], bytes) or (
                    flat[i + 1] is None and kind == b"change")) for i in range(0, len(flat), 2)):
            raise ProtocolError("unexpected %s message %r" % (kind.decode(), message))
        return message[2], [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def _end_snapshot(self):
        """Delivers the snapshot being received, now that a message after it has come."""
        if not self._want_snapshot:
            return
        if self._snapshot is None:
            raise ProtocolError("no snapshot before the changes of namespace %r"
                                % self.namespace)
        seq, items = self._snapshot
        self._snapshot = None
        self._want_snapshot = False
        self.seq = seq
        self._events.append(Snapshot(self.namespace, seq, items))

    def _handle(self, message):
        """Takes one message of the stream: queues the event it completes."""
        kind = message[0] if isinstance(message, list) and message else None
        if kind == b"snapshot":
            seq, items = self._fields(message, kind, 4)
            if not self._want_snapshot:
                raise ProtocolError("a snapshot message after the snapshot on namespace %r"
                                    % self.namespace)
            if self._snapshot is None:
                self._snapshot = (seq, items)
            elif self._snapshot[0] != seq:
                raise ProtocolError("snapshot messages at sequences %d and %d"
                                    % (self._snapshot[0], seq))
            else:
                self._snapshot[1].extend(items)
        elif kind == b"change":
            seq, items = self._fields(message, kind, 4)
            self._end_snapshot()
            if seq <= self.seq:
                raise ProtocolError("change %d of namespace %r after %d: out of order"
                                    % (seq, self.namespace, self.seq))
            self.seq = seq
            self._events.append(Change(self.namespace, seq, items))
        elif kind == b"synced":
            seq, _ = self._fields(message, kind, 3)
            self._end_snapshot()
            if seq < self.seq:
                raise ProtocolError("synced %d of namespace %r after change %d"
                                    % (seq, self.namespace, self.seq))
            self.seq = seq
            self._events.append(Synced(self.namespace, seq))
        else:
            raise ProtocolError("unexpected message %r on a change feed of namespace %r"
                                % (message, self.namespace))


class Mirror(object):
    """A local copy of a namespace's keys (those under a prefix), kept current by following
    its changes with a :class:`ChangeFeed` (``CHANGES ns SNAPSHOT``, on a connection of its
    own). Made by :meth:`Client.mirror`::

        with kv.mirror("config") as config:      # returns once it holds the current state
            config.data.get(b"theme")             # b'dark'
            for event in config:                  # each event after it is applied
                print(event.seq, config.data)

    The mirror changes only inside its own methods, in the calling thread: iterating,
    :meth:`next_event`, :meth:`wait_synced` and :meth:`poll` (which applies what has arrived
    without waiting; while the connection is lost, it makes at most the one reconnection
    attempt that is due, and returns). If the server no longer holds the changes it needs to resume after a lost
    connection, it takes a new snapshot, which replaces the contents of ``data``.

    Attributes:
        data: a dict, key (bytes) -> value (bytes): the keys as of ``seq``. The same dict
            object for the mirror's whole life (a new snapshot refills it).
        seq: the sequence ``data`` is at (None until the snapshot has come).
        synced: True once ``data`` has caught up with the server's live log (False again
            while a new snapshot is being caught up on).
        feed: the :class:`ChangeFeed`.
    """

    def __init__(self, path, namespace, prefix=None, timeout=10.0, reconnect_timeout=60.0):
        """See :meth:`Client.mirror`."""
        self.data = {}
        self.seq = None
        self.synced = False
        self.feed = ChangeFeed(path, namespace, prefix=prefix, snapshot=True, timeout=timeout,
                               reconnect_timeout=reconnect_timeout, resnapshot=True)

    @property
    def namespace(self):
        """The namespace mirrored (str)."""
        return self.feed.namespace

    @property
    def prefix(self):
        """The key prefix (bytes), or None."""
        return self.feed.prefix

    def _apply(self, event):
        if isinstance(event, Snapshot):
            self.data.clear()
            self.data.update(event.items)
            self.synced = False
        elif isinstance(event, Change):
            for key, value in event.items:
                if value is None:
                    self.data.pop(key, None)
                else:
                    self.data[key] = value
        else:
            self.synced = True
        self.seq = event.seq
        return event

    def next_event(self, timeout=None):
        """Waits up to ``timeout`` seconds (None: as long as it takes) for the next event of
        the feed, applies it to ``data`` and returns it; None on timeout or once closed."""
        event = self.feed.next_event(timeout)
        return None if event is None else self._apply(event)

    def __iter__(self):
        return self

    def __next__(self):
        """The next :class:`Snapshot`, :class:`Change` or :class:`Synced`, once applied."""
        event = self.next_event()
        if event is None:
            raise StopIteration
        return event

    def wait_synced(self, timeout=None):
        """Applies events until ``synced`` (at once if it already is); returns True, or False
        if ``timeout`` seconds passed first (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.synced:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self.next_event(remaining) is None:
                return self.synced
        return True

    def poll(self):
        """Applies the events that have already arrived, without waiting; returns how many."""
        count = 0
        while self.next_event(0) is not None:
            count += 1
        return count

    def close(self):
        """Stops following and closes the connection (``data`` stays as it is)."""
        self.feed.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        return "<actorkv.Mirror namespace=%r keys=%d seq=%r%s>" % (
            self.namespace, len(self.data), self.seq, " synced" if self.synced else "")


# --------------------------------------------------------------------------------------------
# Locks


#: Default for :meth:`Lock.acquire`'s ``timeout``: the lock's own.
_LOCK_DEFAULT = object()


class Lock(object):
    """A lock on one key, shared by every client of the server: made by :meth:`Client.lock`.

    ::

        with kv.lock("locks", "job-42", timeout=10) as lock:
            run_job(fencing_token=lock.token)

    Acquiring puts the key on a connection dedicated to holding the lock, only if it is
    absent, as an ephemeral key (``PUT ns key owner IFVERSION 0 EPHEMERAL [PX ms]``). The
    key's new version is the lock's **fencing token**, :attr:`token`: each holder's is larger
    than every earlier holder's, so a resource that remembers the largest token it has seen
    can refuse a late write from a holder that lost the lock (say, after its ``ttl`` ran
    out while it was paused). While the key is held by someone else, the lock follows the key
    (``CHANGES ns PREFIX key``, on another connection of its own) and tries again each time
    the key is deleted: no polling.

    Releasing deletes the key only if it still holds this lock's token
    (``BATCH ns IFVERSION key token DEL key``) and closes the connection. If the holder dies
    instead -- its process exits or is killed with SIGKILL, its connection is lost -- the
    server deletes the key as the connection closes, and a waiter gets the lock at once.
    After a server restart, locks held before it are free.

    ``with`` acquires (waiting up to ``timeout``; :class:`LockTimeout` if it cannot) and
    releases on leaving, also when the block raises. :meth:`acquire` and :meth:`release` do
    the same by hand. A lock object may be acquired again after it is released; it is not
    reentrant (acquiring it while held raises ``RuntimeError``), and like a :class:`Client`
    it is not thread-safe: give each thread its own. Keep a reference to it while it is held:
    a lock that is garbage-collected closes its connection, and the server releases it.

    Attributes:
        namespace: the namespace (str).
        key: the key (bytes).
        owner: the value stored under the key while held (bytes).
        timeout: the default for :meth:`acquire` (seconds, or None).
        ttl: the lease in seconds, or None.
        token: the fencing token (int) of the current or last hold; None before the
            first acquire.
    """

    def __init__(self, path, namespace, key, timeout=None, ttl=None, owner=None,
                 io_timeout=10.0):
        """See :meth:`Client.lock`; ``path`` is the server's socket and ``io_timeout`` the
        :class:`Client` timeout of the lock's connections."""
        self.path = path
        self._ns = _to_bytes(namespace, "namespace")
        self.namespace = _decode_text(self._ns)
        self.key = _to_bytes(key, "key")
        if not self.key:
            raise ValueError("a lock needs a non-empty key")
        self.timeout = _check_timeout(timeout)
        self.ttl = ttl
        self._ttl_ms = None if ttl is None else _ttl_milliseconds(ttl)
        if owner is None:
            owner = "%s:%d" % (socket.gethostname(), os.getpid())
        self.owner = _to_bytes(owner, "owner")
        self.io_timeout = io_timeout
        self.token = None
        self._client = None  # the connection holding the lock, while held
        self._pid = os.getpid()  # the process that acquired it

    @property
    def locked(self):
        """True while this object holds the lock (as far as it knows: with a ``ttl``, or if
        its connection was lost, the server may have released it already)."""
        return self._client is not None

    def _try(self, client):
        """One attempt: the token, or None if the key is held."""
        args = ["PUT", self._ns, self.key, self.owner, "IFVERSION", 0, "EPHEMERAL"]
        if self._ttl_ms is not None:
            args += ["PX", self._ttl_ms]
        return client._call(_new_version, *args)

    def _try_while_waiting(self, client):
        """One attempt while waiting: ``(token or None, lost)``, ``lost`` being True if the
        connection was lost (the server restarting, say). Whatever that PUT did, the server
        undoes as it closes the connection (the key is ephemeral), or at its next start, so
        trying again on a new connection later is safe."""
        try:
            return self._try(client), False
        except ActorKVConnectionError:
            return None, True

    def acquire(self, timeout=_LOCK_DEFAULT):
        """Acquires the lock, waiting up to ``timeout`` seconds (default: the lock's
        ``timeout``; None: as long as it takes; 0: one try) while someone else holds it.
        Returns the fencing token (an int, also :attr:`token`).

        Raises :class:`LockTimeout` if the lock stayed held by others for all of
        ``timeout``; ``RuntimeError`` if this object holds it already;
        :class:`ServerError` for a bad namespace or key; :class:`PermissionDeniedError`
        without the right to write the namespace (or, to wait for a held lock, to read it);
        :class:`ActorKVConnectionError` if the server cannot be reached: at once if it cannot
        be reached at the start; if the connection is lost while waiting, the lock keeps
        trying to reconnect (a server restart frees every lock) until ``timeout`` runs out,
        and then raises :class:`ActorKVConnectionError` rather than :class:`LockTimeout` if
        the server was still out of reach at the end (both come at the deadline, not later).
        With ``timeout=None``, the wait through a lost connection gives up after 60 s of
        failed reconnection attempts in a row (the change feed's ``reconnect_timeout``).
        Whatever it raises, it holds nothing afterwards.
        """
        if self._client is not None:
            raise RuntimeError("the lock %r in namespace %r is already held by this Lock"
                               % (self.key, self.namespace))
        timeout = self.timeout if timeout is _LOCK_DEFAULT else _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        client = Client(self.path, timeout=self.io_timeout)
        feed = None
        lost = False
        unreachable = False
        try:
            token = self._try(client)
            if token is None and timeout != 0:
                feed = self._follow()
                reconnects = feed.reconnects
                # The holder may have gone before the feed began.
                token, lost = self._try_while_waiting(client)
                pause = _RECONNECT_BACKOFF[0]
                while token is None:
                    remaining = None
                    if deadline is not None:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                    # After a lost connection, try again after a pause even if no event
                    # comes: the lost PUT may have been the only thing between us and the lock.
                    wait = remaining if not lost else (pause if remaining is None else min(pause, remaining))
                    event = feed.next_event(wait)
                    again = False
                    if event is None:
                        if feed.closed:  # pragma: no cover - only this method closes it
                            raise ActorKVConnectionError("the lock's change feed was closed")
                        again = lost  # otherwise the deadline passed (checked above)
                    elif isinstance(event, Change):
                        again = lost or any(key == self.key and value is None for key, value in event.items)
                    elif isinstance(event, Snapshot):
                        # The feed could not resume where it stopped (the server no longer
                        # held those changes) and started again from the current keys.
                        again = True
                    elif feed.reconnects != reconnects:
                        # Caught up again after a lost connection (a server restart frees
                        # every lock): the deletes missed meanwhile came before this Synced.
                        reconnects = feed.reconnects
                        again = True
                    if again:
                        token, lost = self._try_while_waiting(client)
                        pause = min(pause * 2.0, _RECONNECT_BACKOFF[1]) if lost else _RECONNECT_BACKOFF[0]
            # At the deadline: was the server out of reach (the last try's connection lost, or
            # the feed still reconnecting) rather than answering that someone holds the lock?
            unreachable = token is None and (lost or (feed is not None and feed._lost_at is not None))
        except BaseException:
            client.close()  # a PUT that went through is undone by the server as it closes
            raise
        finally:
            if feed is not None:
                feed.close()
        if token is None:
            client.close()
            if unreachable:
                raise ActorKVConnectionError(
                    "the lock %r in namespace %r was not acquired within %g s: the server at "
                    "%s could not be reached at the end of the wait; nothing is held"
                    % (self.key, self.namespace, timeout, self.path))
            raise LockTimeout(self.namespace, self.key, timeout)
        self._client = client
        self._pid = os.getpid()
        self.token = token
        return token

    def _follow(self):
        return ChangeFeed(self.path, self._ns, prefix=self.key, timeout=self.io_timeout,
                          resnapshot=True)

    def release(self):
        """Releases the lock: deletes the key if it still holds this lock's token
        (``BATCH ns IFVERSION key token DEL key``), then closes the lock's connection.

        Returns True if the lock was still held by this object until now, False if the
        server had already released it (its ``ttl`` ran out -- another holder may have had
        it meanwhile -- or the connection was lost, a server restart among the causes).
        Leaving a ``with`` block ignores that False: call :meth:`release` by hand, or
        :meth:`check` before acting on the lock, where it matters. In a child process
        forked while the lock was held, it only drops the child's copy of the connection and
        returns False: the lock stays the parent's. Raises ``RuntimeError`` if this object
        does not hold the lock.
        """
        client = self._client
        if client is None:
            raise RuntimeError("the lock %r in namespace %r is not held by this Lock"
                               % (self.key, self.namespace))
        self._client = None
        if self._pid != os.getpid():
            # A child of fork(): the lock is the parent's (its connection holds the key).
            # Drop this process's copy of the connection without touching the server.
            client._forget_inherited()
            return False
        try:
            if not client.connected:
                return False  # lost: the server deleted the key as the connection closed
            return client.delete(self._ns, self.key, if_version=self.token)
        except ActorKVConnectionError:
            return False  # closing the connection releases the lock too
        finally:
            client.close()

    def check(self):
        """True if the server still holds the key with this lock's token (asked on the lock's
        own connection: ``GETV``), False if the lock was lost -- its ``ttl`` ran out, or its
        connection was lost (a server restart, say), which released it. ``RuntimeError`` if
        this object does not hold the lock. A True is a fact of the moment: with a ``ttl``, the
        lock may run out right after; pass :attr:`token` to what the lock protects (fencing)."""
        client = self._client
        if client is None:
            raise RuntimeError("the lock %r in namespace %r is not held by this Lock"
                               % (self.key, self.namespace))
        if not client.connected or self._pid != os.getpid():
            return False
        try:
            current = client.getv(self._ns, self.key)
        except ActorKVConnectionError:
            return False  # the connection, and with it the lock, is gone
        return current is not None and current[1] == self.token

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info):
        if self._client is not None:
            self.release()

    def __del__(self):
        try:
            client, self._client = self._client, None
            if client is not None:
                client.close()  # the server releases the lock
        except Exception:
            pass

    def __repr__(self):
        return "<actorkv.Lock namespace=%r key=%r %s>" % (
            self.namespace, self.key,
            "held token=%d" % self.token if self._client is not None else "not held")
