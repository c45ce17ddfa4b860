"""Namespace permissions (issue #24, protocol.md "Namespace permissions") over the wire, with
real clients under real uids.

Run as root from the repository root::

    python3 -m unittest discover -s Tests/acl -v

Each class starts a real actorkvd (as root, the server's own uid) with an ``--acl`` file in a
temporary directory; the clients are forked children that drop to other uids, gids and
supplementary groups before they connect (see aclwire.py). The uids 2001… and gids 3001… exist
nowhere: the rules name them by number (``uid:2001``, ``gid:3001``); ``user:``/``group:`` rules
use the machine's ``nobody``/``nogroup`` (or another account it has). Every test of a refusal
fails against a server that ignores ``--acl``: what is refused here would be applied there.
(WithoutAcl checks the opposite: without ``--acl`` nothing is refused.)
"""

import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aclwire import (  # noqa: E402
    ACTORKVD, PATIENCE, Error, Server, Simple, info_fields, info_namespaces, noperm,
    require_root_and_server,
)

ROOT_NAME = pwd.getpwuid(0).pw_name


def setUpModule():
    require_root_and_server()


def named_user():
    """(name, uid) of an account other than root for ``user:NAME``: ``nobody`` if there is one."""
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        entry = next((e for e in pwd.getpwall() if e.pw_uid != 0), None)
    return (entry.pw_name, entry.pw_uid) if entry else (None, None)


def named_group():
    """(name, gid) of a group other than root's for ``group:NAME``: ``nogroup`` if there is one."""
    for name in ("nogroup", "nobody"):
        try:
            return name, grp.getgrnam(name).gr_gid
        except KeyError:
            pass
    entry = next((e for e in grp.getgrall() if e.gr_gid != 0), None)
    return (entry.gr_name, entry.gr_gid) if entry else (None, None)


def has_no_name(uid):
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        return True


class ServerTestCase(unittest.TestCase):
    """One server for the class, with the rules ``acl`` (None: no --acl). Every Peer made with
    ``self.peer`` is closed after its test, and must have ended cleanly."""

    acl = None
    flags = ()

    @classmethod
    def setUpClass(cls):
        cls.server = Server(acl=cls.acl, flags=cls.flags)
        try:
            cls.server.start()
        except BaseException:
            cls.server.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            status = cls.server.stop()
            if status != 0:
                raise AssertionError("actorkvd exited %s after SIGTERM:\n%s" % (status, cls.server.log()))
        finally:
            cls.server.cleanup()

    def peer(self, uid, gid, groups=(), main=None):
        peer = self.server.peer(uid, gid, groups, main=main)

        def close():
            status = peer.close()
            self.assertEqual(status, 0, "%r ended with status %s" % (peer, status))
        self.addCleanup(close)
        return peer

    @property
    def root(self):
        return self.server.root

    def assertNoPerm(self, reply, right, namespace, uid, what=""):
        self.assertIsInstance(reply, Error, "%s: expected NOPERM, got %r" % (str(what), reply))
        self.assertEqual(reply, noperm(right, namespace, uid), str(what))

    def assertAllowed(self, reply, what=""):
        self.assertNotIsInstance(reply, Error, "%s: expected it to run, got %r" % (str(what), reply))
        self.assertNotEqual(reply, "EOF", str(what))

    def assertUsable(self, peer, what=""):
        self.assertEqual(peer.call("PING"), "PONG", "%s: the connection should stay usable" % (what,))

    def last_sequence(self, namespace):
        return int(info_namespaces(self.server.info())[namespace]["last_sequence"])


# ============================================================================================
# Each right on each command family


def read_commands(ns):
    return [("GET", ns, "k"), ("GETV", ns, "k"), ("EXISTS", ns, "k"), ("COUNT", ns), ("SCAN", ns, "0"),
            ("PTTL", ns, "k"), ("HGET", ns, "k"), ("HGETALL", ns), ("HSCAN", ns, "0"), ("HMGET", ns, "k"),
            ("HEXISTS", ns, "k"), ("HLEN", ns), ("HSTRLEN", ns, "k"), ("HKEYS", ns), ("HVALS", ns), ("WATCH", ns)]


def write_commands(ns):
    # New keys (n1, b1, h1, h2, e1, x1) and the seeded ones: k has a deadline, f is the number 5.
    return [("PUT", ns, "n1", "new"), ("DEL", ns, "f"), ("INCR", ns, "f"), ("BATCH", ns, "PUT", "b1", "new", "DEL", "k"),
            ("PEXPIRE", ns, "k", "1000"), ("PERSIST", ns, "k"), ("HSET", ns, "h1", "new"), ("HSETNX", ns, "h2", "new"),
            ("HDEL", ns, "f"), ("HINCRBY", ns, "f", "1"), ("PUT", ns, "e1", "new", "EPHEMERAL"), ("PUT", ns, "x1", "new", "PX", "100000")]


class CommandFamilies(ServerTestCase):
    """uid 2001 has exactly read on fam-r, write on fam-w, admin on fam-a, and nothing on
    fam-none: each command is refused, naming the right it needs, wherever that right is
    missing, nothing is applied, and the connection goes on."""

    acl = ("# subject  namespaces  rights\n"
           "uid:2001   fam-r       read\n"
           "uid:2001   fam-w       write\n"
           "uid:2001   fam-a       admin\n"
           "uid:2001   fam-rw      read write\n")
    UID = 2001
    NAMESPACES = ("fam-r", "fam-w", "fam-a", "fam-none")

    def setUp(self):
        for ns in self.NAMESPACES:
            self.assertEqual(self.root.pipeline([("PUT", ns, "k", "seed", "PX", "600000"), ("PUT", ns, "f", "5")]), ["OK", "OK"])
        self.client = self.peer(self.UID, self.UID)

    def assertUntouched(self, ns, sequence):
        """Nothing was applied to `ns` since its last sequence was `sequence`."""
        self.assertEqual(self.last_sequence(ns), sequence, "a refused command wrote to %s" % ns)
        self.assertEqual(self.root.call("GET", ns, "k"), b"seed")
        self.assertGreater(self.root.call("PTTL", ns, "k"), 100000, "a refused PEXPIRE or PERSIST changed k's deadline")
        self.assertEqual(self.root.call("GET", ns, "f"), b"5")
        self.assertEqual(self.root.call("EXISTS", ns, "n1", "b1", "h1", "h2", "e1", "x1"), 0)
        self.assertEqual(self.root.call("COUNT", ns), 2)

    def test_read_commands(self):
        for ns in self.NAMESPACES:
            for command in read_commands(ns):
                reply = self.client.call(*command)
                if ns == "fam-r":
                    self.assertAllowed(reply, command)
                else:
                    self.assertNoPerm(reply, "read", ns, self.UID, command)
                self.assertUsable(self.client, command)
        self.assertEqual(self.client.call("GET", "fam-r", "k"), b"seed")
        self.assertEqual(self.client.call("HGETALL", "fam-r"), [b"f", b"5", b"k", b"seed"])
        self.assertEqual(self.client.call("UNWATCH"), "OK")

    def test_write_commands(self):
        before = {ns: self.last_sequence(ns) for ns in self.NAMESPACES}
        for ns in self.NAMESPACES:
            for command in write_commands(ns):
                reply = self.client.call(*command)
                if ns == "fam-w":
                    self.assertAllowed(reply, command)
                else:
                    self.assertNoPerm(reply, "write", ns, self.UID, command)
                self.assertUsable(self.client, command)
        for ns in ("fam-r", "fam-a", "fam-none"):
            self.assertUntouched(ns, before[ns])
        # On fam-w they ran: the keys they made are there.
        self.assertEqual(self.root.call("EXISTS", "fam-w", "n1", "b1", "h1", "h2", "e1", "x1"), 6)

    def test_unlink_needs_write_on_each(self):
        before = {ns: self.last_sequence(ns) for ns in self.NAMESPACES}
        for names in (("fam-r",), ("fam-a",), ("fam-none",), ("fam-w", "fam-r")):
            reply = self.client.call("UNLINK", *names)
            refused = [ns for ns in names if ns != "fam-w"][0]
            self.assertNoPerm(reply, "write", refused, self.UID, "UNLINK " + " ".join(names))
            self.assertUsable(self.client, "UNLINK")
        for ns in ("fam-r", "fam-a", "fam-none"):
            self.assertUntouched(ns, before[ns])
        self.assertEqual(self.last_sequence("fam-w"), before["fam-w"], "fam-w removed though a name after it was refused")
        self.assertEqual(self.client.call("UNLINK", "fam-w"), 1)
        self.assertNotIn(b"fam-w", self.root.call("NAMESPACES"))

    def test_rename_needs_read_and_write_on_the_source_and_write_on_the_target(self):
        # Read too on the source: renamed into a namespace the client may read, a write-only
        # namespace's keys would be read there.
        before = {ns: self.last_sequence(ns) for ns in self.NAMESPACES}
        for source, target, right, refused in (("fam-w", "fam-rw", "read", "fam-w"), ("fam-r", "fam-w", "write", "fam-r"),
                                               ("fam-w", "fam-none", "read", "fam-w"), ("fam-a", "fam-w", "read", "fam-a"),
                                               ("fam-rw", "fam-r", "write", "fam-r"), ("fam-w", "fam-w", "read", "fam-w")):
            for command in ("RENAME", "RENAMENX"):
                reply = self.client.call(command, source, target)
                self.assertNoPerm(reply, right, refused, self.UID, "%s %s %s" % (command, source, target))
                self.assertUsable(self.client, command)
        for ns in ("fam-r", "fam-a", "fam-none"):
            self.assertUntouched(ns, before[ns])
        self.assertEqual(self.last_sequence("fam-w"), before["fam-w"], "fam-w renamed though refused")
        self.root.call("PUT", "fam-rw", "moved", "1")
        self.assertEqual(self.client.call("RENAME", "fam-rw", "fam-rw"), "OK", "the same name, with read and write on it")
        self.assertEqual(self.client.call("RENAMENX", "fam-rw", "fam-w"), 0, "write alone on the target: fam-w holds keys")
        self.assertEqual(self.client.call("UNLINK", "fam-rw"), 1)

    def test_writes_that_reply_values_need_read_too(self):
        # HGETDEL and HGETEX reply the values they take or touch: write alone would read them.
        sequence = self.last_sequence("fam-w")
        for command in (("HGETDEL", "fam-w", "FIELDS", "1", "k"), ("HGETEX", "fam-w", "FIELDS", "1", "k"),
                        ("HGETEX", "fam-w", "PERSIST", "FIELDS", "1", "k"), ("HGETEX", "fam-w", "PX", "9", "FIELDS", "1", "k")):
            self.assertNoPerm(self.client.call(*command), "read", "fam-w", self.UID, command)
            replies = self.client.pipeline([("MULTI",), command, ("EXEC",)])
            self.assertNoPerm(replies[1], "read", "fam-w", self.UID, ("queued",) + command)
            self.assertEqual(replies[2].code, "EXECABORT", command)
            self.assertUsable(self.client, command)
        self.assertEqual(self.last_sequence("fam-w"), sequence, "a refused command wrote to fam-w")
        self.assertEqual(self.root.call("GET", "fam-w", "k"), b"seed")
        self.assertGreater(self.root.call("PTTL", "fam-w", "k"), 100000, "a refused HGETEX changed k's deadline")
        self.root.call("PUT", "fam-rw", "k", "v")
        self.assertEqual(self.client.pipeline([("MULTI",), ("HGETEX", "fam-rw", "PX", "600000", "FIELDS", "1", "k"),
                                               ("HGETDEL", "fam-rw", "FIELDS", "1", "k"), ("EXEC",)]),
                         ["OK", "QUEUED", "QUEUED", [[b"v"], [b"v"]]])
        self.assertEqual(self.client.call("HGETEX", "fam-rw", "FIELDS", "1", "k"), [None])

    def test_copy_needs_read_on_the_source_and_write_on_the_target(self):
        before = {ns: self.last_sequence(ns) for ns in self.NAMESPACES}
        for source, target, right, refused in (("fam-w", "fam-r", "read", "fam-w"), ("fam-none", "fam-w", "read", "fam-none"),
                                               ("fam-r", "fam-a", "write", "fam-a"), ("fam-r", "fam-r", "write", "fam-r")):
            for options in ((), ("REPLACE",)):
                what = " ".join(("COPY", source, target) + options)
                self.assertNoPerm(self.client.call("COPY", source, target, *options), right, refused, self.UID, what)
                self.assertUsable(self.client, "COPY")
        for ns in self.NAMESPACES:
            self.assertUntouched(ns, before[ns])
        self.assertEqual(self.client.call("COPY", "fam-r", "fam-w"), 0, "fam-w holds keys: not replaced")
        self.assertEqual(self.last_sequence("fam-w"), before["fam-w"])
        self.root.call("PUT", "fam-r", "copied", "yes")
        self.addCleanup(lambda: [self.root.call("DEL", ns, "copied") for ns in ("fam-r", "fam-w")])
        self.assertEqual(self.client.call("COPY", "fam-r", "fam-w", "REPLACE"), 1)
        self.assertEqual((self.root.call("GET", "fam-w", "copied"), self.root.call("GET", "fam-r", "copied")), (b"yes", b"yes"))

    def test_admin_command(self):
        for ns in self.NAMESPACES:
            reply = self.client.call("COMPACT", ns)
            if ns == "fam-a":
                self.assertEqual(reply, "OK")
            else:
                self.assertNoPerm(reply, "admin", ns, self.UID, "COMPACT " + ns)
            self.assertUsable(self.client, "COMPACT")
        stats = info_namespaces(self.server.info())
        self.assertEqual(stats["fam-a"]["compactions"], "1")
        for ns in ("fam-r", "fam-w", "fam-none"):
            self.assertEqual(stats[ns]["compactions"], "0", "a refused COMPACT compacted " + ns)

    def test_changes_needs_read(self):
        for ns in ("fam-w", "fam-a", "fam-none"):
            self.assertNoPerm(self.client.call("CHANGES", ns), "read", ns, self.UID, "CHANGES " + ns)
            # Not following: an ordinary command runs (a follower would get -ERR only CHANGES…).
            self.assertEqual(self.client.call("GET", "fam-r", "k"), b"seed")
        follower = self.peer(self.UID, self.UID)
        sequence = self.last_sequence("fam-r")
        self.assertEqual(follower.call("CHANGES", "fam-r"), [b"changes", b"fam-r", sequence])
        self.assertEqual(follower.read(), ("reply", [b"synced", b"fam-r", sequence]))
        self.root.call("PUT", "fam-r", "live", "1")
        self.assertEqual(follower.read(), ("reply", [b"change", b"fam-r", sequence + 1, [b"live", b"1"]]))
        self.root.call("DEL", "fam-r", "live")

    def test_refused_watch_watches_nothing(self):
        # WATCH of a namespace it may not read is refused whole: fam-r is not watched either, so
        # a write to it does not make the EXEC below fail.
        self.assertNoPerm(self.client.call("WATCH", "fam-r", "fam-w"), "read", "fam-w", self.UID)
        self.root.call("PUT", "fam-r", "k", "seed")
        self.assertEqual(self.client.pipeline([("MULTI",), ("PUT", "fam-w", "t1", "v"), ("EXEC",)]), ["OK", "QUEUED", ["OK"]])

    def test_no_rule_names_the_first_missing_right(self):
        self.assertNoPerm(self.client.call("GET", "other", "k"), "read", "other", self.UID)
        self.assertNoPerm(self.client.call("PUT", "other", "k", "v"), "write", "other", self.UID)
        self.assertNoPerm(self.client.call("COMPACT", "other"), "admin", "other", self.UID)
        self.assertEqual(self.root.call("NAMESPACES").count(b"other"), 0, "a refused PUT created the namespace")


# ============================================================================================
# Subjects and namespace patterns

USER_NAME, USER_UID = named_user()
GROUP_NAME, GROUP_GID = named_group()


class Subjects(ServerTestCase):
    """Which rules apply to whom, and where: uid, primary and supplementary gid, user and group
    names, ``*``; exact names, prefixes and ``*``; the union of the rules that match."""

    acl = ("uid:2001      exact      read write\n"
           "uid:2001      pre-*      read write\n"
           "uid:2002      *          read\n"
           "gid:3001      grp-one    read write\n"
           "gid:3002      grp-two    read write\n"
           + ("user:%s      by-user    read write\n" % USER_NAME if USER_NAME else "")
           + ("group:%s     by-group   read write\n" % GROUP_NAME if GROUP_NAME else "")
           + "uid:2003      union      read\n"
           "gid:3003      union      write\n"
           "uid:2003      union      admin\n"
           "*             public     read\n")

    def check(self, identity, expected):
        """A client of `identity` (uid, gid, groups) has exactly the rights `expected`
        ({namespace: "rw", "r", "w" or ""}) on those namespaces, judged over the wire by a GET
        and a PUT of a key of its own; its PUTs that were refused are not applied."""
        uid, gid, groups = identity
        client = self.peer(uid, gid, groups)
        key = "p-%d-%d-%s" % (uid, gid, "-".join(map(str, groups)))
        for ns, rights in expected.items():
            what = "uid %d gid %d groups %s on %s" % (uid, gid, groups, ns)
            read, write = client.pipeline([("GET", ns, key), ("PUT", ns, key, "v")])
            if "r" in rights:
                self.assertAllowed(read, what + ": GET")
            else:
                self.assertNoPerm(read, "read", ns, uid, what + ": GET")
            if "w" in rights:
                self.assertEqual(write, "OK", what + ": PUT")
            else:
                self.assertNoPerm(write, "write", ns, uid, what + ": PUT")
            self.assertEqual(self.root.call("EXISTS", ns, key), 1 if "w" in rights else 0, what + ": the PUT's key")
            self.root.call("DEL", ns, key)
        self.assertUsable(client)
        return client

    def test_uid_with_exact_names_and_prefixes(self):
        self.check((2001, 2001, []), {
            "exact": "rw", "exact2": "", "exac": "",
            "pre-a": "rw", "pre-": "rw", "pre-zz.9_": "rw", "pre": "", "xpre-a": "", "PRE-a": "",
            "public": "r", "grp-one": "", "union": ""})

    def test_uid_on_every_namespace(self):
        self.check((2002, 2002, []), {"exact": "r", "pre-a": "r", "anything": "r", "public": "r"})

    def test_primary_gid(self):
        self.check((2010, 3001, []), {"grp-one": "rw", "grp-two": "", "exact": "", "public": "r"})

    def test_supplementary_gid(self):
        self.check((2010, 2010, [3002]), {"grp-two": "rw", "grp-one": "", "public": "r"})
        self.check((2010, 2010, [3001, 3002]), {"grp-one": "rw", "grp-two": "rw"})
        self.check((2010, 2010, [3999]), {"grp-one": "", "grp-two": ""})
        # More groups than the server's first SO_PEERGROUPS buffer (64) holds, the one that
        # matters last.
        self.check((2010, 2010, list(range(3100, 3200)) + [3002]), {"grp-two": "rw", "grp-one": ""})

    def test_user_name(self):
        if USER_NAME is None:
            self.skipTest("no account other than root on this machine")
        self.check((USER_UID, 2010, []), {"by-user": "rw", "by-group": "", "public": "r"})

    def test_group_name(self):
        if GROUP_NAME is None:
            self.skipTest("no group other than root's on this machine")
        self.check((2010, GROUP_GID, []), {"by-group": "rw", "by-user": "", "grp-one": ""})
        self.check((2010, 2010, [GROUP_GID]), {"by-group": "rw", "by-user": ""})

    def test_union_of_rules(self):
        # uid 2003 may read and administer union; gid 3003 may write it.
        reader = self.check((2003, 2003, []), {"union": "r"})
        writer = self.check((2011, 3003, []), {"union": "w"})
        both = self.check((2003, 3003, []), {"union": "rw"})
        self.root.call("PUT", "union", "k", "v")
        self.assertEqual(reader.call("COMPACT", "union"), "OK")
        self.assertEqual(both.call("COMPACT", "union"), "OK")
        self.assertNoPerm(writer.call("COMPACT", "union"), "admin", "union", 2011)

    def test_anyone(self):
        self.check((2099, 2099, []), {"public": "r", "exact": "", "pre-a": "", "union": ""})

    def test_whoami_and_client_info(self):
        self.assertTrue(has_no_name(2001), "the tests assume uid 2001 has no name on this machine")
        client = self.peer(2001, 3001, [3002])
        self.assertEqual(client.call("ACL", "WHOAMI"), b"2001")
        info = client.call("CLIENT", "INFO").decode()
        self.assertIn(" uid=2001 gid=3001 ", info)
        self.assertIn(" user=2001 ", info)
        if USER_NAME is not None:
            named = self.peer(USER_UID, USER_UID)
            self.assertEqual(named.call("ACL", "WHOAMI"), USER_NAME.encode())
            self.assertIn(" uid=%d gid=%d " % (USER_UID, USER_UID), named.call("CLIENT", "INFO").decode())
        self.assertEqual(self.root.call("ACL", "WHOAMI"), ROOT_NAME.encode())
        self.assertIn(" uid=0 gid=0 ", self.root.call("CLIENT", "INFO").decode())


# ============================================================================================
# BATCH, MULTI/EXEC, pipelines


class Transactions(ServerTestCase):
    """uid 2001 may read and write tx-rw, only read tx-r."""

    acl = ("uid:2001  tx-rw  read write\n"
           "uid:2001  tx-r   read\n")
    UID = 2001

    def setUp(self):
        self.server.write_acl(self.acl)
        self.root.call("ACL", "LOAD")
        self.client = self.peer(self.UID, self.UID)

    def test_batch_refused_whole(self):
        self.root.call("PUT", "tx-r", "k", "seed")
        sequence = self.last_sequence("tx-r")
        self.assertNoPerm(self.client.call("BATCH", "tx-r", "PUT", "b1", "v", "DEL", "k", "INCR", "c", "1"), "write", "tx-r", self.UID)
        self.assertUsable(self.client)
        self.assertEqual(self.last_sequence("tx-r"), sequence)
        self.assertEqual(self.root.call("EXISTS", "tx-r", "b1", "k", "c"), 1)
        self.assertEqual(self.client.call("BATCH", "tx-rw", "PUT", "b1", "v", "INCR", "c", "1"), ["OK", 1])

    def test_multi_with_a_refused_command(self):
        replies = self.client.pipeline([("MULTI",), ("HSET", "tx-rw", "m1", "v"), ("PUT", "tx-r", "m2", "v"), ("EXEC",), ("PING",)])
        self.assertEqual(replies[:2], ["OK", "QUEUED"])
        self.assertNoPerm(replies[2], "write", "tx-r", self.UID)
        self.assertIsInstance(replies[3], Error)
        self.assertEqual(replies[3].code, "EXECABORT")
        self.assertEqual(replies[4], "PONG")
        self.assertEqual(self.root.call("EXISTS", "tx-rw", "m1"), 0)
        self.assertEqual(self.root.call("EXISTS", "tx-r", "m2"), 0)
        # A read it may not make, queued: the same.
        replies = self.client.pipeline([("MULTI",), ("PUT", "tx-rw", "m3", "v"), ("GET", "tx-none", "k"), ("EXEC",)])
        self.assertNoPerm(replies[2], "read", "tx-none", self.UID)
        self.assertEqual(replies[3].code, "EXECABORT")
        self.assertEqual(self.root.call("EXISTS", "tx-rw", "m3"), 0)

    def test_multi_whose_right_is_withdrawn_before_exec(self):
        self.root.call("PUT", "tx-rw", "seed", "1")
        sequence = self.last_sequence("tx-rw")
        self.assertEqual(self.client.pipeline([("MULTI",), ("PUT", "tx-rw", "w1", "v"), ("INCR", "tx-rw", "w2")]), ["OK", "QUEUED", "QUEUED"])
        self.server.write_acl("uid:2001  tx-rw  read\n")
        self.server.reload_by_signal()
        self.assertNoPerm(self.client.call("EXEC"), "write", "tx-rw", self.UID)
        self.assertUsable(self.client)
        self.assertEqual(self.root.call("EXISTS", "tx-rw", "w1", "w2"), 0)
        self.assertEqual(self.last_sequence("tx-rw"), sequence)
        # The transaction is over: a new one is judged by the rules now in force.
        self.assertEqual(self.client.call("EXEC").code, "ERR")

    def test_multi_whose_watched_read_is_withdrawn_before_exec(self):
        self.assertEqual(self.client.pipeline([("WATCH", "tx-r"), ("MULTI",), ("PUT", "tx-rw", "w3", "v")]), ["OK", "OK", "QUEUED"])
        self.server.write_acl("uid:2001  tx-rw  read write\n")
        self.root.call("ACL", "LOAD")
        self.assertNoPerm(self.client.call("EXEC"), "read", "tx-r", self.UID)
        self.assertEqual(self.root.call("EXISTS", "tx-rw", "w3"), 0)

    def test_pipeline_judged_request_by_request(self):
        replies = self.client.pipeline([
            ("PUT", "tx-rw", "p1", "v1"), ("PUT", "tx-r", "p2", "v2"), ("GET", "tx-rw", "p1"), ("INCR", "tx-r", "p3"),
            ("PUT", "tx-rw", "p4", "v4"), ("GET", "tx-none", "p1"), ("DEL", "tx-r", "p1"), ("PING",)])
        self.assertEqual(replies[0], "OK")
        self.assertNoPerm(replies[1], "write", "tx-r", self.UID)
        self.assertEqual(replies[2], b"v1")
        self.assertNoPerm(replies[3], "write", "tx-r", self.UID)
        self.assertEqual(replies[4], "OK")
        self.assertNoPerm(replies[5], "read", "tx-none", self.UID)
        self.assertNoPerm(replies[6], "write", "tx-r", self.UID)
        self.assertEqual(replies[7], "PONG")
        self.assertEqual(self.root.call("EXISTS", "tx-rw", "p1", "p4"), 2)
        self.assertEqual(self.root.call("EXISTS", "tx-r", "p2", "p3"), 0)


# ============================================================================================
# NAMESPACES and INFO


class Listing(ServerTestCase):
    acl = ("uid:2001  vis-*   read\n"
           "uid:2001  wonly   write\n"
           "uid:2001  adm     admin\n")
    ALL = [b"adm", b"hidden", b"vis-a", b"vis-b", b"wonly"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for ns in cls.ALL:
            cls.server.root.call("PUT", ns, "k", "v")

    def listed(self, client):
        names = client.call("NAMESPACES")
        info = client.call("INFO").decode()
        return names, sorted(info_namespaces(info)), int(info_fields(info)["namespaces"])

    def test_only_readable_namespaces_are_listed(self):
        self.assertEqual(self.listed(self.peer(2001, 2001)), ([b"vis-a", b"vis-b"], ["vis-a", "vis-b"], 2))
        self.assertEqual(self.listed(self.peer(2002, 2002)), ([], [], 0))
        # The server's own uid sees them all.
        self.assertEqual(self.listed(self.root), (self.ALL, [n.decode() for n in self.ALL], len(self.ALL)))

    def test_listing_follows_a_reload(self):
        client = self.peer(2002, 2002)
        self.server.write_acl(self.acl + "uid:2002  hidden  read\n")
        try:
            self.server.reload_by_signal()
            self.assertEqual(self.listed(client), ([b"hidden"], ["hidden"], 1))
        finally:
            self.server.write_acl(self.acl)
            self.server.reload_by_signal()
        self.assertEqual(self.listed(client), ([], [], 0))


# ============================================================================================
# CHANGES followers cut off by a reload


class Followers(ServerTestCase):
    acl = ("uid:2001  feed-a  read\n"
           "uid:2002  feed-b  read\n"
           "uid:2003  feed-a  read\n")
    WITHDRAWN = ("uid:2002  feed-b  read\n"
                 "uid:2003  feed-a  read\n")

    def setUp(self):
        self.server.write_acl(self.acl)
        self.root.call("ACL", "LOAD")

    def follow(self, uid, ns):
        follower = self.peer(uid, uid)
        header = follower.call("CHANGES", ns)
        self.assertEqual(header[:2], [b"changes", ns.encode()])
        self.assertEqual(follower.read(), ("reply", [b"synced", ns.encode(), header[2]]))
        return follower

    def expect_change(self, follower, ns, key, value):
        kind, message = follower.read()
        self.assertEqual(kind, "reply")
        self.assertEqual((message[0], message[1], message[3]), (b"change", ns.encode(), [key.encode(), value.encode()]))

    def expect_cut_off(self, follower, ns, uid):
        kind, message = follower.read()
        self.assertEqual(kind, "reply", "expected -NOPERM before the end of the stream")
        self.assertNoPerm(message, "read", ns, uid)
        self.assertEqual(follower.read(), ("eof", None), "the server should close the connection after -NOPERM")

    def run_withdrawal(self, withdraw):
        cut, other, same = self.follow(2001, "feed-a"), self.follow(2002, "feed-b"), self.follow(2003, "feed-a")
        self.root.call("PUT", "feed-a", "k1", "v1")
        self.root.call("PUT", "feed-b", "k1", "v1")
        self.expect_change(cut, "feed-a", "k1", "v1")
        self.expect_change(same, "feed-a", "k1", "v1")
        self.expect_change(other, "feed-b", "k1", "v1")
        self.server.write_acl(self.WITHDRAWN)
        withdraw()
        self.expect_cut_off(cut, "feed-a", 2001)
        # The others keep following, undisturbed.
        self.root.call("PUT", "feed-a", "k2", "v2")
        self.root.call("PUT", "feed-b", "k2", "v2")
        self.expect_change(same, "feed-a", "k2", "v2")
        self.expect_change(other, "feed-b", "k2", "v2")
        self.assertUsable(same)
        self.assertUsable(other)
        self.assertEqual(int(info_namespaces(self.server.info())["feed-a"]["followers"]), 1)

    def test_withdrawn_by_sighup(self):
        self.run_withdrawal(self.server.reload_by_signal)

    def test_withdrawn_by_acl_load(self):
        self.run_withdrawal(lambda: self.assertEqual(self.root.call("ACL", "LOAD"), "OK"))

    def test_a_refused_changes_leaves_a_follower_following(self):
        follower = self.follow(2001, "feed-a")
        self.assertNoPerm(follower.call("CHANGES", "feed-b"), "read", "feed-b", 2001)
        self.root.call("PUT", "feed-a", "k4", "v4")
        self.expect_change(follower, "feed-a", "k4", "v4")
        self.assertUsable(follower)

    def test_the_end_of_a_feed_names_only_namespaces_the_follower_may_read(self):
        # RENAME and COPY onto a followed namespace end its feed, saying what replaced it: the
        # other namespace is named only to a follower that may read it.
        for command, named, anonymous in (
                ("RENAME", "the namespace was replaced by 'feed-src', renamed to it", "the namespace was replaced by another, renamed to it"),
                ("COPY", "the namespace was replaced by a copy of 'feed-src'", "the namespace was replaced by a copy of another")):
            self.server.write_acl(self.acl + "uid:2003  feed-src  read\n")
            self.root.call("ACL", "LOAD")
            self.root.call("PUT", "feed-src", "s", "1")
            self.root.call("PUT", "feed-a", "k0", "v0")
            blind, seeing = self.follow(2001, "feed-a"), self.follow(2003, "feed-a")
            self.assertEqual(self.root.call(command, "feed-src", "feed-a", *(("REPLACE",) if command == "COPY" else ())),
                             "OK" if command == "RENAME" else 1)
            for follower, words in ((blind, anonymous), (seeing, named)):
                while True:
                    kind, message = follower.read()
                    self.assertEqual(kind, "reply", command)
                    if isinstance(message, Error):
                        break
                self.assertEqual(message.code, "LAGGING", command)
                self.assertTrue(str(message).endswith("(%s)" % words), "%s: %s" % (command, message))
            self.root.call("UNLINK", "feed-a", "feed-src")

    def test_a_reload_that_keeps_the_right_cuts_nobody_off(self):
        follower = self.follow(2001, "feed-a")
        self.server.write_acl(self.acl + "uid:2009  feed-a  read\n")
        self.server.reload_by_signal()
        self.root.call("PUT", "feed-a", "k3", "v3")
        self.expect_change(follower, "feed-a", "k3", "v3")
        self.assertUsable(follower)


# ============================================================================================
# BACKUP, CLIENT LIST, CLIENT KILL and SHUTDOWN: the server's own uid only, whatever rights a
# rule grants


class Backups(ServerTestCase):
    acl = "uid:2001  *  read write admin\n"

    def test_backup_only_from_the_server_uid(self):
        peer = self.peer(2001, 2001)
        self.assertEqual(peer.call("PUT", "bk", "k", "v"), "OK")
        target = os.path.join(self.server.dir, "copy")
        self.assertEqual(peer.call("BACKUP", target),
                         "NOPERM only the server's own uid 0 may run BACKUP; this connection is uid 2001",
                         "every right on every namespace is not the server's uid")
        self.assertFalse(os.path.exists(target))
        self.assertUsable(peer)
        self.assertEqual(self.root.call("BACKUP", target), "OK")
        self.assertEqual(sorted(os.listdir(target)), ["bk"])

    def test_shutdown_only_from_the_server_uid(self):
        peer = self.peer(2001, 2001)
        self.assertEqual(peer.call("SHUTDOWN", "NOSAVE"),
                         "NOPERM only the server's own uid 0 may run SHUTDOWN; this connection is uid 2001")
        self.assertUsable(peer)
        self.assertUsable(self.root, "the server still serves")

    def test_client_list_only_from_the_server_uid(self):
        peer = self.peer(2001, 2001)
        self.assertEqual(peer.call("CLIENT", "LIST"),
                         "NOPERM only the server's own uid 0 may run CLIENT LIST; this connection is uid 2001")
        self.assertUsable(peer)
        listed = self.root.call("CLIENT", "LIST")
        self.assertIn(b" uid=2001 gid=2001 ", listed, "the peer's line, with its credentials")
        self.assertIn(b" uid=0 gid=0 ", listed)
        self.assertEqual(peer.call("CLIENT", "KILL", "SKIPME", "no"),
                         "NOPERM only the server's own uid 0 may run CLIENT KILL; this connection is uid 2001")
        self.assertUsable(peer)


class Flushing(ServerTestCase):
    """FLUSHDB/FLUSHALL need the write right on every namespace there is: uid 2002 may write
    one of three and read all, and is refused, nothing removed; uid 2001 may write (not read)
    every namespace, and removes them all."""

    acl = ("uid:2001  *        write\n"
           "uid:2002  *        read\n"
           "uid:2002  fl-own   write\n")

    def test_flush_needs_write_on_every_namespace(self):
        for ns in ("fl-a", "fl-b", "fl-own"):
            self.assertEqual(self.root.call("PUT", ns, "k", ns), "OK")
        partial = self.peer(2002, 2002)
        for command in (("FLUSHDB",), ("FLUSHALL", "ASYNC")):
            self.assertEqual(partial.call(*command),
                             "NOPERM FLUSHDB and FLUSHALL remove every namespace, and uid 2002 lacks the write "
                             "permission on some; nothing was removed", command)
            self.assertUsable(partial, command)
        self.assertEqual(self.root.call("NAMESPACES"), [b"fl-a", b"fl-b", b"fl-own"])
        self.assertEqual(self.root.call("GET", "fl-own", "k"), b"fl-own", "the namespace it may write was not removed either")
        writer = self.peer(2001, 2001)
        self.assertEqual(writer.call("FLUSHALL"), "OK")
        self.assertEqual(self.root.call("NAMESPACES"), [])
        self.assertEqual(partial.call("GET", "fl-a", "k"), None)


# ============================================================================================
# ACL LOAD and SIGHUP: who may reload, and a file with a mistake


class Reloading(ServerTestCase):
    acl = ("# line 1\n"
           "uid:2001  load-ns  read write\n"
           "uid:2002  load-ns  read\n")
    MISTAKE = ("# line 1\n"
               "uid:2001  load-ns  read write\n"
               "uid:2002  load-ns  wrte\n")

    def setUp(self):
        self.server.write_acl(self.acl)
        self.assertEqual(self.root.call("ACL", "LOAD"), "OK")
        self.writer, self.reader = self.peer(2001, 2001), self.peer(2002, 2002)

    def assertOldRulesInForce(self):
        self.assertEqual(self.writer.call("PUT", "load-ns", "k", "v"), "OK")
        self.assertNoPerm(self.reader.call("PUT", "load-ns", "k", "v"), "write", "load-ns", 2002)
        self.assertEqual(self.reader.call("GET", "load-ns", "k"), b"v")

    def test_acl_load_from_the_server_uid(self):
        before = self.server.acl_reloads()
        self.assertEqual(self.root.call("ACL", "LOAD"), "OK")
        self.assertEqual(self.server.acl_reloads(), before + 1)
        self.assertEqual(info_fields(self.server.info())["acl_rules"], "2")

    def test_acl_load_from_another_uid(self):
        before = self.server.acl_reloads()
        for words in (("ACL", "LOAD"), ("acl", "load")):
            self.assertEqual(self.writer.call(*words), "NOPERM only the server's own uid 0 may run ACL LOAD; this connection is uid 2001")
        self.assertUsable(self.writer)
        self.assertEqual(self.server.acl_reloads(), before)

    def test_acl_load_with_a_mistake(self):
        before = self.server.acl_reloads()
        self.server.write_acl(self.MISTAKE)
        self.assertEqual(self.root.call("ACL", "LOAD"),
                         "ERR %s:3: unknown right 'wrte' (expected read, write or admin)" % self.server.acl_path)
        self.assertEqual(self.server.acl_reloads(), before)
        self.assertOldRulesInForce()

    def test_acl_load_of_a_missing_file(self):
        os.unlink(self.server.acl_path)
        self.assertEqual(self.root.call("ACL", "LOAD"), "ERR %s: cannot read: No such file or directory" % self.server.acl_path)
        self.assertOldRulesInForce()

    def test_sighup_with_a_mistake(self):
        before = self.server.acl_reloads()
        self.server.write_acl(self.MISTAKE)
        start = len(self.server.log())
        self.server.process.send_signal(signal.SIGHUP)
        self.server.wait_for_log("SIGHUP: %s:3: unknown right 'wrte'" % self.server.acl_path, start)
        self.assertIn("keeping the rules in force", self.server.log()[start:])
        self.assertIsNone(self.server.process.poll(), "the server should keep running")
        self.assertEqual(self.root.call("PING"), "PONG")
        self.assertEqual(self.server.acl_reloads(), before)
        self.assertOldRulesInForce()

    def test_new_rules_apply_to_open_connections(self):
        self.assertOldRulesInForce()
        self.server.write_acl("uid:2001  load-ns  read\n"
                              "uid:2002  load-ns  read write\n")
        self.server.reload_by_signal()
        self.assertNoPerm(self.writer.call("PUT", "load-ns", "k", "v"), "write", "load-ns", 2001)
        self.assertEqual(self.reader.call("PUT", "load-ns", "k", "v2"), "OK")
        self.assertEqual(self.writer.call("GET", "load-ns", "k"), b"v2")


# ============================================================================================
# Start-up with a bad --acl


class Startup(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="akvacl.", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def refused(self, acl_path):
        """Starts actorkvd with --acl acl_path; it must exit non-zero without ever making its
        socket. Returns its stderr."""
        socket_path = os.path.join(self.dir, "s")
        stderr_path = os.path.join(self.dir, "stderr.log")
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen([ACTORKVD, "--socket", socket_path, "--data-dir", os.path.join(self.dir, "data"),
                                        "--socket-mode", "666", "--acl", acl_path],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + PATIENCE
            while process.poll() is None and not os.path.exists(socket_path) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertFalse(os.path.exists(socket_path), "actorkvd --acl %s started serving" % acl_path)
            self.assertIsNotNone(process.poll(), "actorkvd --acl %s did not exit" % acl_path)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        self.assertNotEqual(process.returncode, 0)
        with open(stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def write(self, text):
        path = os.path.join(self.dir, "acl.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_missing_file(self):
        path = os.path.join(self.dir, "nope.conf")
        self.assertIn("%s: cannot read: No such file or directory" % path, self.refused(path))

    def test_writable_by_others(self):
        path = self.write("* * read\n")
        os.chmod(path, 0o666)
        self.assertIn("%s: other users may write to it (mode 666), and whoever writes it grants every right; "
                      "run chmod go-w on it" % path, self.refused(path))

    def test_directory(self):
        self.assertIn("%s: cannot read: Is a directory" % self.dir, self.refused(self.dir))

    def test_mistake(self):
        path = self.write("# subject  namespaces  rights\n"
                          "uid:2001   config      read\n"
                          "uid:2002   config      read wrte\n")
        self.assertIn("%s:3: unknown right 'wrte'" % path, self.refused(path))

    def test_unknown_user_name(self):
        path = self.write("\n\nuser:no-such-user-akv  config  read\n")
        self.assertIn("%s:3: unknown user 'no-such-user-akv'" % path, self.refused(path))


# ============================================================================================
# Without --acl, and the server's own uid


class WithoutAcl(ServerTestCase):
    acl = None

    def test_another_uid_has_every_right(self):
        self.root.call("PUT", "open", "seed", "1")
        client = self.peer(2001, 2001)
        self.assertEqual(client.pipeline([
            ("PUT", "open", "k", "v"), ("GET", "open", "k"), ("INCR", "open", "c"), ("BATCH", "open", "PUT", "b", "1"),
            ("HSET", "open", "h", "1"), ("PEXPIRE", "open", "h", "100000"), ("PERSIST", "open", "h"), ("DEL", "open", "b"),
            ("COMPACT", "open"), ("MULTI",), ("PUT", "open", "m", "1"), ("EXEC",)]),
            ["OK", b"v", 1, ["OK"], 1, 1, 1, 1, "OK", "OK", "QUEUED", ["OK"]])
        self.assertIn(b"open", client.call("NAMESPACES"))
        self.assertIn("open", info_namespaces(client.call("INFO")))
        follower = self.peer(2002, 2002)
        self.assertEqual(follower.call("CHANGES", "open")[0], b"changes")

    def test_acl_load_and_sighup_without_a_file(self):
        for conn in (self.root, self.peer(2001, 2001)):
            reply = conn.call("ACL", "LOAD")
            self.assertIsInstance(reply, Error)
            self.assertTrue(reply.startswith("ERR no --acl file"), reply)
        start = len(self.server.log())
        self.server.process.send_signal(signal.SIGHUP)
        self.server.wait_for_log("SIGHUP: nothing to reload (no --acl file)", start)
        self.assertEqual(self.root.call("PING"), "PONG")
        self.assertNotIn("acl_reloads", self.server.info())


class ServerOwnUid(ServerTestCase):
    """An ACL file without a rule: the server's own uid keeps every right, whatever its gid."""

    acl = "# nothing for anyone\n\n"

    def test_owner_unrestricted(self):
        for conn in (self.root, self.peer(0, 4001, [4002])):
            self.assertEqual(conn.pipeline([
                ("PUT", "own", "k", "v"), ("GET", "own", "k"), ("HINCRBY", "own", "c", "2"), ("BATCH", "own", "DEL", "c"),
                ("COMPACT", "own"), ("MULTI",), ("PUT", "own", "m", "1"), ("EXEC",)]),
                ["OK", b"v", 2, [1], "OK", "OK", "QUEUED", ["OK"]])
            self.assertIn(b"own", conn.call("NAMESPACES"))
        follower = self.peer(0, 4001)
        header = follower.call("CHANGES", "own")
        self.assertEqual(header[:2], [b"changes", b"own"])
        self.assertEqual(follower.read(), ("reply", [b"synced", b"own", header[2]]))
        self.server.reload_by_signal()
        self.root.call("PUT", "own", "after", "reload")
        self.assertEqual(follower.read(), ("reply", [b"change", b"own", header[2] + 1, [b"after", b"reload"]]))

    def test_others_have_nothing(self):
        client = self.peer(2001, 2001)
        self.assertNoPerm(client.call("GET", "own", "k"), "read", "own", 2001)
        self.assertNoPerm(client.call("PUT", "own", "k", "x"), "write", "own", 2001)
        self.assertNoPerm(client.call("COMPACT", "own"), "admin", "own", 2001)
        self.assertEqual(client.call("NAMESPACES"), [])


# ============================================================================================
# Reloads under load


def writer_main(index, namespaces, per_round, conn, lines):
    """A writer under load: rounds of pipelined PUTs of unique keys (``<index>-<n>``, value the
    key) to each of `namespaces`, until the parent says stop; then a PING, and one report of
    every key acknowledged (+OK) or refused (-NOPERM) by namespace, and any other reply."""
    acked = {ns: [] for ns in namespaces}
    refused = {ns: [] for ns in namespaces}
    unexpected, n, rounds, dropped = [], 0, 0, None
    try:
        while not lines.ready():
            commands = []
            for ns in namespaces:
                for _ in range(per_round):
                    key = "%d-%d" % (index, n)
                    n += 1
                    commands.append(("PUT", ns, key, key))
            replies = conn.pipeline(commands)
            for (_, ns, key, _), reply in zip(commands, replies):
                if reply == "OK" and isinstance(reply, Simple):
                    acked[ns].append(key)
                elif isinstance(reply, Error) and reply.code == "NOPERM":
                    refused[ns].append((key, str(reply)))
                else:
                    unexpected.append((ns, key, repr(reply)))
            rounds += 1
        last = conn.pipeline([("PING",)])[0]
        if last != "PONG":
            dropped = "the final PING got %r" % (last,)
    except (EOFError, OSError) as error:
        dropped = "%s: %s" % (type(error).__name__, error)
    lines.recv()
    lines.send({"acked": acked, "refused": refused, "unexpected": unexpected[:20], "rounds": rounds, "dropped": dropped})


class ReloadUnderLoad(ServerTestCase):
    """Four writers under different identities write continuously to three namespaces each:
    `both-i` (writable under both rule files), `flip-i` (under the first only) and `never-i`
    (under neither), while the two files are swapped in (written aside, renamed over the file)
    twenty times, put in force by SIGHUP and ACL LOAD in turn."""

    # Writers 0 and 1 are named by uid, 2 by its primary gid, 3 by a supplementary gid.
    WRITERS = [(2001, 2001, []), (2002, 2002, []), (2003, 3003, []), (2004, 2004, [3004])]
    SUBJECTS = ["uid:2001", "uid:2002", "gid:3003", "gid:3004"]
    RELOADS = 20

    @classmethod
    def rules(cls, flipped):
        lines = []
        for i, subject in enumerate(cls.SUBJECTS):
            lines.append("%s  both-%d  %s" % (subject, i, "read write" if not flipped else "write"))
            lines.append("%s  flip-%d  %s" % (subject, i, "write" if not flipped else "read"))
            if not flipped:
                lines.append("%s  never-%d  read" % (subject, i))
        return "\n".join(lines) + "\n"

    @classmethod
    def setUpClass(cls):
        cls.acl = cls.rules(False)
        super().setUpClass()

    def all_keys(self, ns):
        keys, cursor = set(), b"0"
        while True:
            cursor, page = self.root.call("SCAN", ns, cursor, "COUNT", "1000")
            for i in range(0, len(page), 2):
                self.assertEqual(page[i], page[i + 1], "key %r of %s holds another value" % (page[i], ns))
                keys.add(page[i].decode())
            if cursor == b"0":
                return keys

    def test_reloads_under_load(self):
        writers = []
        for i, (uid, gid, groups) in enumerate(self.WRITERS):
            namespaces = ["both-%d" % i, "flip-%d" % i, "never-%d" % i]
            main = (lambda i, namespaces: lambda conn, lines: writer_main(i, namespaces, 8, conn, lines))(i, namespaces)
            writers.append(self.peer(uid, gid, groups, main=main))
        time.sleep(0.3)
        for n in range(self.RELOADS):
            self.server.write_acl(self.rules(n % 2 == 0))
            if n % 2 == 0:
                self.server.reload_by_signal()
            else:
                self.assertEqual(self.root.call("ACL", "LOAD"), "OK")
            time.sleep(0.15)
        self.assertEqual(self.server.acl_reloads(), self.RELOADS)
        for writer in writers:
            writer.order({"op": "stop"})
        reports = [writer.report() for writer in writers]

        acknowledged = refused = 0
        for i, ((uid, _, _), report) in enumerate(zip(self.WRITERS, reports)):
            self.assertFalse(report["dropped"], "writer %d's connection was dropped: %s" % (i, report["dropped"]))
            self.assertEqual(report["unexpected"], [], "writer %d got replies other than +OK and -NOPERM" % i)
            self.assertGreater(report["rounds"], 0)
            for ns in report["acked"]:
                for key, error in report["refused"][ns]:
                    self.assertEqual(error, noperm("write", ns, uid), key)
                present = self.all_keys(ns)
                missing = set(report["acked"][ns]) - present
                self.assertEqual(missing, set(), "acknowledged writes lost in %s" % ns)
                applied = set(key for key, _ in report["refused"][ns]) & present
                self.assertEqual(applied, set(), "refused writes applied in %s" % ns)
                self.assertEqual(len(present), len(report["acked"][ns]), ns)
                acknowledged += len(report["acked"][ns])
                refused += len(report["refused"][ns])
            self.assertEqual(report["refused"]["both-%d" % i], [], "writer %d refused where both files let it write" % i)
            self.assertEqual(report["acked"]["never-%d" % i], [], "writer %d wrote where neither file lets it" % i)
            self.assertGreater(len(report["acked"]["both-%d" % i]), 0)
        for writer in writers:
            self.assertEqual(writer.wait(), 0)
        flips = ", ".join("%d/%d" % (len(r["acked"]["flip-%d" % i]), len(r["refused"]["flip-%d" % i])) for i, r in enumerate(reports))
        print("\n    reload under load%s: %d writers, %d reloads, %d acknowledged writes, %d NOPERM, 0 dropped "
              "(flip namespaces +OK/NOPERM: %s)" % (" (" + " ".join(self.flags) + ")" if self.flags else "", len(writers), self.RELOADS, acknowledged, refused, flips),
              file=sys.stderr, flush=True)


class ReloadUnderLoadPool(ReloadUnderLoad):
    """The same with the namespace actors on Swift's cooperative pool: ACL LOAD then runs off
    the event loop's thread."""

    flags = ("--execution", "pool")


if __name__ == "__main__":
    unittest.main()
