#!/usr/bin/env python3
"""Runs the code blocks of Markdown files against a real actorkvd, so the docs cannot drift
from the code.

    python3 Tests/docs/run_snippets.py README.md protocol.md
    python3 Tests/docs/run_snippets.py --list README.md          # what would run, and how
    python3 Tests/docs/run_snippets.py --only 120,188 README.md  # the blocks opening on these lines

The convention
--------------
Every code block is a fenced block whose info string says what it is. The first word is the
language; the words after it are options (GitHub uses only the first word to highlight).

  ```sh / ```bash   run with `bash -e -o pipefail`: must exit 0.
  ```python         run with python3 (PYTHONPATH=Clients/python): must exit 0. A block that
                    imports `redis` runs with the virtual environment's .build-venv/bin/python
                    (redis-py), which .ci/run creates.
  ```js             run with node (NODE_PATH gets /usr/share/nodejs, Debian's node-redis).
  ```ruby           run with ruby (Debian's ruby-redis).
  ```swift          compiled, warnings being errors, as an executable of a throwaway package that
                    depends on this one, then run: must exit 0. A block whose first line is
                    `// swift-tools-version…` is instead that package's manifest (Package.swift):
                    each snippet becomes one more executable target of it, with the
                    dependencies of the manifest's first target. At most one such block.
  ```console        a terminal transcript: each `$ command` line (a line ending in `\\`
                    continues it) is run with bash on a pseudo-terminal (so programs print as
                    they do for a person), and its output must be the lines that follow, up to
                    the next `$ `. The exit status is not checked: the output is.
  ```resp           a protocol session: each `> COMMAND` line is sent as an inline request over
                    one connection to the server; the reply, as raw RESP with each CRLF shown
                    as a line break, must be the lines that follow, up to the next prompt.
                    `NAME> COMMAND` sends over another connection, named NAME (e.g. `b> …` for a
                    second client); every connection stays open to the end of the block. A
                    prompt without a command (`>` or `NAME>` alone) sends nothing: the lines
                    after it are what arrives on that connection meanwhile (the messages a
                    follower gets for another connection's writes, say). Replies are read until
                    they make as many lines as the doc shows (so several messages of a stream
                    can follow one command), or with a `[...]` line until none comes for 0.3 s.
  ```text           never run: layouts, grammars, output shown for reading.

In expected output (console, resp), `[...]` in a line matches any text, and a line that is just
`[...]` matches any number of lines. Trailing spaces and trailing blank lines are ignored.

Options, after the language:
  continues      run against the server and working directory of the last block run before it
                 (its keys, its files) instead of fresh ones; blocks not run in between do not
                 matter.
  check          only checked, not run: `bash -n`, Python's compile(), Swift's compiler,
                 `node --check`, `ruby -c` (not for console or resp).
  forever        a program that follows changes and never ends: it must still be running
                 after 1.5 s, and is then stopped.
  stops          the block stops its server (`redis-cli shutdown`): the server must have exited
                 with status 0 by the end of the block, where for any other block its exit is a
                 failure. A block after it cannot be `continues`.
  timeout=SECS   how long the block may run (default 30).
  pending=WHAT   expected to fail until WHAT is built (e.g. `pending=#21`): its failure is
                 reported but does not fail the run; once it passes, the run fails until the
                 marker is removed.

A block that must not be run, in any language, has the comment `<!-- not run: REASON -->`
on the last non-blank line before its fence. Everything else fails the run: a fenced block
without a language, a language not listed above without that comment, an indented code block
(4 spaces outside a list: fence it and tag it), an unknown option.

How blocks run
--------------
Each block gets a new empty working directory and its own server in it, started as
`actorkvd --socket ./actorkv.sock --data-dir ./actorkv-data` from that directory: the server's
defaults, so `./actorkv.sock` in a snippet is that server's socket (unless `continues`), and
INFO shows those paths. The runner waits for the server's "accepting connections" log line
rather than connecting, so the block's own connections are the server's first (INFO's
counters are those of a new server). PATH
starts with the directory of $ACTORKVD (default .build/debug/actorkvd, built by `swift build`),
where the `actorkv` command line is too. The Swift snippets' package is kept in
.build/doc-snippets, so a second run rebuilds only what changed.

The exit status is 0 when every block passed or is pending, 1 otherwise. Only the Python
standard library is used.
"""

import argparse
import difflib
import errno
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PYTHON = os.path.join(ROOT, ".build-venv", "bin", "python")
SNIPPET_PACKAGE_BASE = os.path.join(ROOT, ".build", "doc-snippets")

RUN_LANGUAGES = {"sh", "bash", "python", "js", "ruby", "swift", "console", "resp"}
OPTIONS = {"continues", "check", "forever", "stops", "timeout", "pending"}
FOREVER_SECONDS = 1.5
DEFAULT_TIMEOUT = 30.0

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:(.*?)-->\s*$")
LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d{1,9}[.)])(\s|$)")
IMPORTS_REDIS = re.compile(r"^\s*(import|from)\s+redis\b", re.M)
PROMPT = re.compile(r"^([A-Za-z0-9_-]*)>(?: (.*))?$")   # `>` alone: send nothing, read
WILDCARD = "[...]"
READY_LOG_LINE = "accepting connections"     # actorkvd's log line once its socket listens


# --------------------------------------------------------------------------------------------
# Finding the blocks


class Block(object):
    """One code block of a Markdown file."""

    def __init__(self, path, line, info, code, indented=False, not_run=None):
        self.path = path
        self.line = line            # 1-based line of the opening fence (or first indented line)
        self.info = info
        self.code = code
        self.indented = indented
        self.not_run = not_run      # the reason given in <!-- not run: … -->, or None
        words = info.split()
        self.language = words[0].lower() if words else ""
        self.options = {}
        for word in words[1:]:
            name, _, value = word.partition("=")
            self.options[name] = value if value else True
        self.problem = None         # why the block breaks the convention
        self.manifest = self.language == "swift" and code.lstrip().startswith("// swift-tools-version")

    @property
    def where(self):
        return "%s:%d" % (os.path.relpath(self.path), self.line)

    @property
    def runs(self):
        """Whether the runner executes or checks the block (otherwise it only lists it)."""
        return self.problem is None and self.not_run is None and self.language in RUN_LANGUAGES

    @property
    def check_only(self):
        return bool(self.options.get("check"))

    @property
    def pending(self):
        value = self.options.get("pending")
        return None if value is None else (value if value is not True else "a feature not built yet")

    @property
    def timeout(self):
        return float(self.options.get("timeout", DEFAULT_TIMEOUT))


def find_blocks(path):
    """The code blocks of the Markdown file at `path`, fenced and indented, in order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    list_indent = None     # inside a list: where its outermost item's text starts
    previous = ""          # the last non-blank line outside code blocks
    previous_blank = True
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        fence = FENCE.match(line.lstrip(" "))
        if fence and indent <= (list_indent or 0) + 3 and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            marker, info = fence.group(2), fence.group(3).strip()
            closing = re.compile(r"^ *%s{%d,}\s*$" % (re.escape(marker[0]), len(marker)))
            body = []
            j = i + 1
            while j < len(lines) and not closing.match(lines[j]):
                body.append(_dedent(lines[j], indent))
                j += 1
            not_run = NOT_RUN.match(previous)
            blocks.append(Block(path, i + 1, info, "\n".join(body) + "\n",
                                not_run=not_run.group(1).strip() if not_run else None))
            previous, previous_blank = line, False
            i = j + 1
            continue
        code_indent = 4 if list_indent is None else list_indent + 4
        if line.strip() and previous_blank and (indent >= code_indent or (line.startswith("\t") and list_indent is None)):
            body = []
            j = i
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" " * code_indent)
                                      or lines[j].startswith("\t")):
                body.append(lines[j])
                j += 1
            while body and not body[-1].strip():
                body.pop()
            blocks.append(Block(path, i + 1, "", "\n".join(body) + "\n", indented=True))
            i += len(body)
            previous_blank = False
            continue
        item = LIST_ITEM.match(line)
        if item and indent <= 3 and (list_indent is None or indent < list_indent):   # not a nested item
            after = line[item.end(1):]
            list_indent = item.end(1) + min(len(after) - len(after.lstrip(" ")), 4)
        elif line.strip() and indent == 0 and not item:
            list_indent = None
        if line.strip():
            previous = line
        previous_blank = not line.strip()
        i += 1
    return blocks


def _dedent(line, indent):
    strip = 0
    while strip < indent and strip < len(line) and line[strip] == " ":
        strip += 1
    return line[strip:]


def check_convention(blocks):
    """Sets `problem` on each block that breaks the convention (see the module's doc)."""
    manifests = [b for b in blocks if b.manifest and b.not_run is None]
    for block in manifests[1:]:
        block.problem = "a second Swift package manifest (the first is at %s)" % manifests[0].where
    previous_run = None
    for block in blocks:
        if block.problem:
            pass
        elif block.indented:
            block.problem = "an indented code block: make it a fenced block with a language (```sh, ```text, …)"
        elif block.not_run is not None:
            if not block.not_run:
                block.problem = "<!-- not run: --> without a reason"
        elif not block.language:
            block.problem = ("a fenced block without a language: tag it (```sh, ```python, ```swift, ```console, "
                             "```resp, ```text, …) or put <!-- not run: REASON --> before it")
        elif block.language == "text":
            pass
        elif block.language not in RUN_LANGUAGES:
            block.problem = ("```%s is not a language the runner runs: use one it runs, ```text, or put "
                             "<!-- not run: REASON --> before it" % block.language)
        else:
            unknown = sorted(set(block.options) - OPTIONS)
            if unknown:
                block.problem = "unknown option(s) %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(OPTIONS)))
            elif block.language in ("console", "resp") and (block.check_only or block.options.get("forever")):
                block.problem = "check and forever are not for ```%s blocks" % block.language
            elif block.manifest and set(block.options) - {"pending"}:
                block.problem = "a package manifest takes no option but pending"
            elif block.options.get("continues") and (previous_run is None or previous_run.manifest):
                block.problem = "continues, but no block before it is run"
            elif block.options.get("continues") and previous_run.options.get("stops"):
                block.problem = "continues, but the block before it stops its server"
            elif block.options.get("stops") and block.check_only:
                block.problem = "stops is not for a block that is only checked"
            elif "timeout" in block.options:
                try:
                    if float(block.options["timeout"]) <= 0:
                        raise ValueError()
                except ValueError:
                    block.problem = "timeout=%s is not a number of seconds" % block.options["timeout"]
        if block.runs:
            previous_run = block


# --------------------------------------------------------------------------------------------
# Servers and working directories


class Failure(Exception):
    """A block did not do what its doc says."""


class SetupFailure(Failure):
    """What a block needs is missing here (a tool, the virtual environment): a failure even for
    a pending block, which would otherwise pass unnoticed."""


class Environment(object):
    """A working directory with its own actorkvd, started there with the default paths."""

    def __init__(self, scratch, number, actorkvd):
        self.directory = os.path.join(scratch, "block-%d" % number)
        os.makedirs(self.directory)
        self.socket = os.path.join(self.directory, "actorkv.sock")
        self.log_path = os.path.join(scratch, "server-%d.log" % number)
        self.env = dict(os.environ)
        self.env["PATH"] = os.path.dirname(actorkvd) + os.pathsep + self.env.get("PATH", "")
        self.env["PYTHONPATH"] = os.path.join(ROOT, "Clients", "python")
        if os.path.isdir("/usr/share/nodejs"):
            self.env["NODE_PATH"] = os.pathsep.join(filter(None, [self.env.get("NODE_PATH"), "/usr/share/nodejs"]))
        self.env["TERM"] = "dumb"
        self.env.pop("ACTORKV_SOCKET", None)
        with open(self.log_path, "wb") as log:
            self.server = subprocess.Popen([actorkvd, "--socket", "./actorkv.sock", "--data-dir", "./actorkv-data"],
                                           cwd=self.directory, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        # Its log says when it listens (a probe connection would count in INFO's figures).
        deadline = time.monotonic() + 20
        while True:
            if self.server.poll() is not None:
                raise Failure("actorkvd exited with status %d at start:\n%s" % (self.server.returncode, self.server_log()))
            if READY_LOG_LINE in self.server_log(lines=100):
                break
            if time.monotonic() > deadline:
                self.close()
                raise Failure("actorkvd did not log %r within 20 s:\n%s" % (READY_LOG_LINE, self.server_log()))
            time.sleep(0.02)

    def server_log(self, lines=20):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def close(self):
        if self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()


def _stop_group(process):
    """Kills a process started with start_new_session, and whatever it started, and reaps it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    process.wait()


# --------------------------------------------------------------------------------------------
# Running programs


def write_source(block, env, name):
    """Writes the block's code into the working directory as `name`; returns its path."""
    path = os.path.join(env.directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(block.code)
    return path


def run_program(block, argv, env):
    """Runs `argv` in the working directory. Raises Failure unless it exits 0 within the block's
    timeout or, for a `forever` block, is still running after FOREVER_SECONDS."""
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(argv, cwd=env.directory, env=env.env, stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        limit = FOREVER_SECONDS if block.options.get("forever") else block.timeout
        try:
            status = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            _stop_group(process)
        output.seek(0)
        shown = _tail(output.read().decode("utf-8", "replace"))
    if block.options.get("forever"):
        if status is not None:
            raise Failure("should keep running, but exited with status %d within %.1f s%s"
                          % (status, FOREVER_SECONDS, shown))
    elif status is None:
        raise Failure("still running after %g s (tag it `forever` if it follows changes)%s" % (limit, shown))
    elif status != 0:
        raise Failure("exited with status %d%s" % (status, shown))


def _tail(text, lines=30):
    text = text.rstrip("\n")
    if not text:
        return ""
    kept = text.split("\n")
    cut = "" if len(kept) <= lines else "  [... %d lines]\n" % (len(kept) - lines)
    return ":\n" + cut + "\n".join("  | " + line for line in kept[-lines:])


def run_shell(block, env):
    if block.check_only:
        _check_command(["bash", "-n"], block, env, "snippet.sh")
    else:
        run_program(block, ["bash", "-e", "-o", "pipefail", write_source(block, env, "snippet.sh")], env)


def run_python(block, env):
    if block.check_only:
        try:
            compile(block.code, block.where, "exec")
        except SyntaxError as error:
            raise Failure("does not compile: %s" % error)
        return
    python = sys.executable
    if IMPORTS_REDIS.search(block.code):
        if not os.access(VENV_PYTHON, os.X_OK):
            raise SetupFailure("imports redis, which runs with %s, and there is none: create it as .ci/run does, with\n"
                          "  python3 -m venv .build-venv && .build-venv/bin/pip install redis"
                          % os.path.relpath(VENV_PYTHON))
        python = VENV_PYTHON
    run_program(block, [python, write_source(block, env, "snippet.py")], env)


def run_node(block, env):
    if shutil.which("node") is None:
        raise SetupFailure("needs node: apt-get install nodejs node-redis (as .ci/run does)")
    if block.check_only:
        _check_command(["node", "--check"], block, env, "snippet.js")
    else:
        run_program(block, ["node", write_source(block, env, "snippet.js")], env)


def run_ruby(block, env):
    if shutil.which("ruby") is None:
        raise SetupFailure("needs ruby: apt-get install ruby ruby-redis (as .ci/run does)")
    if block.check_only:
        _check_command(["ruby", "-c"], block, env, "snippet.rb")
    else:
        run_program(block, ["ruby", write_source(block, env, "snippet.rb")], env)


def _check_command(command, block, env, source_name):
    """Runs a syntax check, `command` + the block's code as a file; raises Failure if it fails."""
    result = subprocess.run(command + [write_source(block, env, source_name)], cwd=env.directory, env=env.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    if result.returncode != 0:
        raise Failure("does not pass `%s`%s" % (" ".join(command), _tail(result.stdout.decode("utf-8", "replace"))))


# --------------------------------------------------------------------------------------------
# Transcripts


def expected_output_matches(expected_lines, actual_text):
    """Whether `actual_text` is what `expected_lines` show, with `[...]` wildcards."""
    actual = _clean_lines(actual_text.split("\n"))
    parts = []
    for line in _clean_lines(expected_lines):
        if line.strip() == WILDCARD:
            parts.append(r"(?:[^\n]*\n)*")
        else:
            parts.append(r"[^\n]*".join(re.escape(piece) for piece in line.split(WILDCARD)) + r"\n")
    return re.fullmatch("".join(parts), "".join(line + "\n" for line in actual)) is not None


def _clean_lines(lines):
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _mismatch(command, expected_lines, actual_text):
    diff = difflib.unified_diff(_clean_lines(expected_lines), _clean_lines(actual_text.split("\n")),
                                "expected (the doc)", "actual", lineterm="", n=2)
    return "the output of %s differs from the doc:\n%s" % (command, "\n".join("  " + line for line in diff))


def run_console(block, env):
    commands = []       # (command, expected lines)
    lines = block.code.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if lines[i].strip():
                raise Failure("line %d: output before the first `$ command`" % (block.line + 1 + i))
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        commands.append((command, expected))
    if not commands:
        raise Failure("a console block without a `$ command` line")
    for command, expected in commands:
        actual = _run_on_terminal(command, env, block.timeout)
        if not expected_output_matches(expected, actual):
            raise Failure(_mismatch("`%s`" % command, expected, actual))


def _run_on_terminal(command, env, timeout):
    """Runs `command` with bash, its output on a pseudo-terminal; returns that output."""
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(["bash", "-c", command], cwd=env.directory, env=env.env, stdin=subprocess.DEVNULL,
                                   stdout=slave, stderr=slave, start_new_session=True)
    finally:
        os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    exited_at = None
    try:
        while True:
            now = time.monotonic()
            if process.poll() is not None and exited_at is None:
                exited_at = now
            if now > deadline or (exited_at is not None and now - exited_at > 0.5):
                break
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError as error:
                    if error.errno != errno.EIO:
                        raise
                    data = b""
                if not data:
                    break    # every holder of the terminal has closed it
                chunks.append(data)
    finally:
        os.close(master)
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        _stop_group(process)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r", "")
    if timed_out:
        raise Failure("`%s` still running after %g s%s" % (command, timeout, _tail(text)))
    return text


def run_resp(block, env):
    steps = []          # (connection name, command, expected lines)
    for number, line in enumerate(block.code.rstrip("\n").split("\n")):
        prompt = PROMPT.match(line)
        if prompt:
            steps.append((prompt.group(1), prompt.group(2) or "", []))
        elif steps:
            steps[-1][2].append(line)
        elif line.strip():
            raise Failure("line %d: a reply before the first `> COMMAND`" % (block.line + 1 + number))
    if not steps:
        raise Failure("a resp block without a `> COMMAND` line")
    connections = {}
    try:
        for name, command, expected in steps:
            if name not in connections:
                connections[name] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                connections[name].connect(env.socket)
            if command.strip():
                connections[name].sendall(command.encode("utf-8") + b"\r\n")
            text = _read_replies(connections[name], expected, min(block.timeout, 5.0))
            if not expected_output_matches(expected, text):
                raise Failure(_mismatch("`%s> %s`" % (name, command), expected, text))
    finally:
        for connection in connections.values():
            connection.close()


def _read_replies(connection, expected, wait):
    """Reads whole replies until they fill as many lines as `expected` has (or, if it has a
    `[...]` line, until none arrives for 0.3 s), waiting at most `wait` seconds for each;
    returns what arrived as text, CRLFs as line breaks."""
    wanted = len(_clean_lines(expected))
    open_ended = any(line.strip() == WILDCARD for line in expected)
    replies = buffer = b""
    deadline = time.monotonic() + wait
    while True:
        try:
            end = _reply_end(buffer, 0)
        except ValueError:       # not RESP: show it as it is
            break
        if end is not None:
            replies, buffer = replies + buffer[:end], buffer[end:]
            shown = replies.decode("utf-8", "replace").replace("\r\n", "\n").rstrip("\n").split("\n")
            if not open_ended and len(shown) >= wanted:
                break
            if open_ended:
                deadline = time.monotonic() + 0.3
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        connection.settimeout(remaining)
        try:
            data = connection.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        buffer += data
    text = replies + buffer    # a partial reply is shown as it is
    return text.decode("utf-8", "replace").replace("\r\n", "\n")


def _reply_end(data, start):
    """The offset just past the RESP2/RESP3 value starting at `start`, or None if incomplete."""
    line_end = data.find(b"\r\n", start)
    if line_end < 0:
        return None
    kind = data[start:start + 1]
    after = line_end + 2
    if kind in (b"$", b"!", b"="):
        length = int(data[start + 1:line_end])
        if length < 0:
            return after
        return after + length + 2 if len(data) >= after + length + 2 else None
    if kind in (b"*", b"~", b">", b"%", b"|"):
        count = int(data[start + 1:line_end])
        if kind in (b"%", b"|"):
            count *= 2
        position = after
        for _ in range(max(count, 0)):
            position = _reply_end(data, position)
            if position is None:
                return None
        if kind == b"|":      # attributes come before the reply they describe
            return _reply_end(data, position)
        return position
    return after


# --------------------------------------------------------------------------------------------
# Swift


DEFAULT_MANIFEST = """// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DocSnippets",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "../ActorKV")],
    targets: [
        .executableTarget(name: "DocSnippets", dependencies: [
            .product(name: "ActorKVClient", package: "ActorKV"),
            .product(name: "ActorKVStore", package: "ActorKV"),
            .product(name: "ActorKVProtocol", package: "ActorKV"),
        ]),
    ]
)
"""


class SwiftPackage(object):
    """The throwaway package the Swift snippets are compiled in: the docs' manifest (or a
    default one) plus one executable target per snippet, depending on this checkout by path."""

    def __init__(self, blocks):
        self.blocks = [b for b in blocks if b.runs and b.language == "swift" and not b.manifest]
        manifests = [b for b in blocks if b.runs and b.manifest]
        self.manifest = manifests[0] if manifests else None
        self.directory = os.path.join(SNIPPET_PACKAGE_BASE, "app")
        self.failures = {}     # block -> message
        self.build_seconds = 0.0

    @staticmethod
    def target_name(block):
        stem = re.sub(r"[^A-Za-z0-9]", "_", os.path.splitext(os.path.basename(block.path))[0])
        return "snippet_%s_L%d" % (stem, block.line)

    def build(self):
        if not self.blocks and not self.manifest:
            return
        started = time.monotonic()
        manifest = self.manifest.code if self.manifest else DEFAULT_MANIFEST
        dependency = re.search(r'\.package\(\s*path:\s*"([^"]+)"', manifest)
        if not dependency or os.path.isabs(dependency.group(1)):
            self._fail_all("the Swift package manifest must depend on this package with .package(path: \"../…\")")
            return
        os.makedirs(self.directory, exist_ok=True)
        link = os.path.normpath(os.path.join(self.directory, dependency.group(1)))
        if not link.startswith(SNIPPET_PACKAGE_BASE + os.sep):
            self._fail_all("the manifest's path dependency %s leads outside %s" % (dependency.group(1), SNIPPET_PACKAGE_BASE))
            return
        if os.path.islink(link) and os.readlink(link) != ROOT:
            os.unlink(link)
        if not os.path.islink(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(ROOT, link)
        names = [self.target_name(b) for b in self.blocks]
        # Warnings are errors in the snippets, so that a snippet with one is compiled (and fails)
        # on every run, not only on the run after it changed.
        appended = "\n// Added by Tests/docs/run_snippets.py: one executable per snippet.\n" \
                   "for name in [%s] {\n" \
                   "    package.targets.append(.executableTarget(name: name, dependencies: package.targets[0].dependencies,\n" \
                   "                                             path: \"DocSnippets/\" + name,\n" \
                   "                                             swiftSettings: [.unsafeFlags([\"-warnings-as-errors\"])]))\n" \
                   "}\n" % ", ".join('"%s"' % n for n in names)
        _write_if_changed(os.path.join(self.directory, "Package.swift"), manifest + appended)
        # The manifest's own first target gets an empty main.swift, wherever it keeps its sources.
        first = re.search(r'\.(?:executableTarget|target)\(\s*name:\s*"([^"]+)"', manifest)
        if first:
            _write_if_changed(os.path.join(self.directory, "Sources", first.group(1), "main.swift"),
                              "// The snippets are the other targets (DocSnippets/).\n")
        snippets = os.path.join(self.directory, "DocSnippets")
        if os.path.isdir(snippets):
            for stale in set(os.listdir(snippets)) - set(names):
                shutil.rmtree(os.path.join(snippets, stale))
        for block, name in zip(self.blocks, names):
            _write_if_changed(os.path.join(snippets, name, "main.swift"), block.code)
        output, status = self._swift_build([])
        manifest_errors = re.findall(r"^\S*/Package\.swift:(\d+):\d+: error: (.*)$", output, re.M)
        if manifest_errors:
            self._fail_all("the snippet package's manifest does not build: %s"
                           % "; ".join("line %s: %s" % error for error in manifest_errors))
        else:
            self._record(output)
            if status != 0:
                # An error in one snippet stops the whole build: build each of the others alone.
                for block, name in zip(self.blocks, names):
                    if block not in self.failures:
                        alone, status = self._swift_build(["--product", name])
                        self._record(alone)
                        if status != 0 and block not in self.failures:
                            self.failures[block] = "did not build" + _tail(alone, 40)
        self.build_seconds = time.monotonic() - started

    def _swift_build(self, arguments):
        result = subprocess.run(["swift", "build", "--package-path", self.directory] + arguments,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return result.stdout.decode("utf-8", "replace"), result.returncode

    def _record(self, output):
        """Records, as its failure, the diagnostics of each snippet that `output` reports."""
        found = {}
        for match in re.finditer(r"^\S*/DocSnippets/(\w+)/main\.swift:(\d+):(\d+): (error|warning): (.*)$",
                                 output, re.M):
            found.setdefault(match.group(1), [])
            if match.groups()[1:] not in [m.groups()[1:] for m in found[match.group(1)]]:
                found[match.group(1)].append(match)
        for block in self.blocks:
            matches = found.get(self.target_name(block))
            if matches:
                self.failures[block] = "does not compile without warnings:\n" + "\n".join(
                    "  %s:%d: %s: %s" % (os.path.relpath(block.path), block.line + int(m.group(2)), m.group(4), m.group(5))
                    for m in matches)

    def _fail_all(self, message):
        for block in self.blocks + ([self.manifest] if self.manifest else []):
            self.failures[block] = message

    def executable(self, block):
        return os.path.join(self.directory, ".build", "debug", self.target_name(block))


def _write_if_changed(path, text):
    """Writes `text` to `path` unless it holds it already, so that an unchanged snippet is not rebuilt."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run_swift(block, env, package):
    failure = package.failures.get(block)
    if failure:
        raise Failure(failure)
    if block.manifest or block.check_only:
        return
    executable = package.executable(block)
    if not os.access(executable, os.X_OK):
        raise Failure("its executable %s was not built" % executable)
    run_program(block, [executable], env)


# --------------------------------------------------------------------------------------------
# Main


RUNNERS = {"sh": run_shell, "bash": run_shell, "python": run_python, "js": run_node, "ruby": run_ruby,
           "console": run_console, "resp": run_resp}


def describe(block):
    if block.problem:
        return "ERROR: " + block.problem
    if block.not_run is not None:
        return "not run: " + block.not_run
    if block.language == "text":
        return "text, not run"
    if block.manifest:
        action = "the Swift snippets' package manifest"
    else:
        action = ("checked" if block.check_only else "run") + ("" if block.language != "swift" else " (compiled)")
    flags = []
    if block.options.get("continues"):
        flags.append("continues")
    if block.options.get("forever"):
        flags.append("forever")
    if block.options.get("stops"):
        flags.append("stops its server")
    if block.pending:
        flags.append("pending: %s" % block.pending)
    return "%s %s%s" % (block.language, action, " (%s)" % ", ".join(flags) if flags else "")


def check_stopped(env):
    """For a `stops` block: its server must have exited, with status 0, by the end of it."""
    try:
        status = env.server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        raise Failure("the block should stop its server (it is tagged stops), but the server still runs 5 s after it")
    if status != 0:
        raise Failure("the server exited with status %d:\n%s" % (status, env.server_log()))


def main():
    parser = argparse.ArgumentParser(description="Runs the code blocks of Markdown files (see this script's doc).")
    parser.add_argument("files", nargs="+", metavar="FILE.md")
    parser.add_argument("--list", action="store_true", help="list the blocks and what would be done with each")
    parser.add_argument("--only", help="comma-separated opening lines of the blocks to run (others are skipped)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    arguments = parser.parse_args()

    blocks = []
    for path in arguments.files:
        found = find_blocks(path)
        check_convention(found)
        blocks += found
    if arguments.list:
        for block in blocks:
            print("%-22s %s" % (block.where, describe(block)))
        return 0
    if arguments.only:
        wanted = {int(n) for n in arguments.only.split(",")}
        for block in blocks:
            if block.line not in wanted and block.runs:
                block.not_run = "not in --only"

    actorkvd = os.path.abspath(os.environ.get("ACTORKVD") or os.path.join(ROOT, ".build", "debug", "actorkvd"))
    started = time.monotonic()
    errors = [b for b in blocks if b.problem]
    failed, pending, passed, unexpected, setup_failures = [], [], [], [], []
    if not os.access(actorkvd, os.X_OK):
        print("no actorkvd at %s: build it with `swift build`, or set ACTORKVD" % actorkvd)
        return 1

    package = SwiftPackage(blocks)
    if package.blocks or package.manifest:
        print("-- building the Swift snippets' package (%d snippets) in %s"
              % (len(package.blocks), os.path.relpath(package.directory)), flush=True)
        package.build()
        print("   %.1f s" % package.build_seconds, flush=True)

    scratch = tempfile.mkdtemp(prefix="akv-doc-")
    env = None
    try:
        for number, block in enumerate(blocks):
            if block.problem:
                print("ERROR %s: %s" % (block.where, block.problem))
                continue
            if not block.runs:
                continue
            one_started = time.monotonic()
            try:
                if env is None or not block.options.get("continues"):
                    if env is not None:
                        env.close()
                    env = None
                    env = Environment(scratch, number, actorkvd)
                if block.language == "swift":
                    run_swift(block, env, package)
                else:
                    RUNNERS[block.language](block, env)
                if block.options.get("stops"):
                    check_stopped(env)
                elif env.server.poll() is not None:
                    raise Failure("the server exited with status %d during the block:\n%s"
                                  % (env.server.returncode, env.server_log()))
                outcome = None
            except Failure as failure:
                outcome = str(failure)
                if isinstance(failure, SetupFailure):
                    setup_failures.append(block)
            seconds = time.monotonic() - one_started
            label = "%s %s" % (block.where, block.language)
            if outcome is None and block.pending:
                unexpected.append(block)
                print("FAIL  %s (%.1f s): passes, but is marked pending=%s: remove the marker"
                      % (label, seconds, block.pending))
            elif outcome is None:
                passed.append(block)
                print("ok    %s (%.1f s)" % (label, seconds))
            elif block.pending and block not in setup_failures:
                pending.append(block)
                lines = [line.strip() for line in outcome.split("\n") if line.strip()]
                telling = [line for line in lines[1:] if re.search(r"error|ERR", line)] or lines[1:]
                print("pending %s (%.1f s), until %s: %s" % (label, seconds, block.pending,
                                                             " … ".join(lines[:1] + telling[-1:])))
            else:
                failed.append(block)
                print("FAIL  %s (%.1f s): %s" % (label, seconds, outcome), flush=True)
            sys.stdout.flush()
    finally:
        if env is not None:
            env.close()
        if arguments.keep:
            print("scratch directory kept: %s" % scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    skipped = [b for b in blocks if not b.problem and not b.runs]
    print("-- %s: %d passed, %d failed, %d pending (expected failures), %d convention errors, %d not run; %.1f s"
          % (", ".join(arguments.files), len(passed), len(failed) + len(unexpected), len(pending), len(errors),
             len(skipped), time.monotonic() - started))
    return 1 if failed or unexpected or errors else 0


if __name__ == "__main__":
    sys.exit(main())
