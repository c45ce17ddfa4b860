"""Tests of run_snippets.py: that it runs what the convention says it runs, and fails the run
when a block does not do what its doc shows. Each test writes a Markdown file and runs the
runner on it against a real actorkvd ($ACTORKVD, default .build/debug/actorkvd).

    python3 -m unittest discover -s Tests/docs
"""

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_snippets.py")
FENCE = "```"


class RunSnippetsTests(unittest.TestCase):
    def run_doc(self, text):
        """Runs the runner on `text` (with ''' standing for a fence); returns (status, output)."""
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "doc.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text).replace("'''", FENCE))
            result = subprocess.run([sys.executable, RUNNER, path], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, timeout=120)
        return result.returncode, result.stdout.decode("utf-8", "replace")

    def assert_outcomes(self, output, expected):
        """`expected`: the outcome word of each run block, in order (ok, FAIL, pending, ERROR)."""
        found = re.findall(r"^(ok|FAIL|pending|ERROR) ", output, re.M)
        self.assertEqual(found, expected, output)

    def test_blocks_that_do_what_they_show_pass(self):
        status, output = self.run_doc("""
            # A doc

            '''sh
            actorkv put config theme dark
            test "$(actorkv get config theme)" = dark
            '''

            '''text
            a block not run between two that share a server
            '''

            '''console continues
            $ printf 'GET config theme\\r\\n' | nc -U -N actorkv.sock
            $4
            dark
            $ echo one; echo two; echo three
            one
            [...]
            $ echo "version 1.2.3 built"
            version [...] built
            '''

            '''resp
            > PUT locks job x IFVERSION 0 EPHEMERAL
            :1
            b> PUT locks job y IFVERSION 0 EPHEMERAL
            $-1
            > GET locks job
            $1
            x
            '''

            '''python
            import actorkv
            with actorkv.Client("./actorkv.sock") as kv:
                assert kv.get("config", "theme") is None     # a fresh server
            '''

            '''sh forever
            actorkv changes config
            '''

            '''python check
            def later(): return undefined_name
            '''

            <!-- not run: an example of what is not run -->
            '''sh
            exit 1
            '''

            '''text
            not code
            '''
            """)
        self.assertEqual(status, 0, output)
        self.assert_outcomes(output, ["ok"] * 6)
        self.assertIn("6 passed, 0 failed", output)
        self.assertIn("3 not run", output)

    def test_output_that_differs_from_the_doc_fails(self):
        status, output = self.run_doc("""
            '''console
            $ echo hello
            goodbye
            '''

            '''resp
            > PING
            +PONG
            > GET config missing
            $0
            '''
            """)
        self.assertEqual(status, 1, output)
        self.assert_outcomes(output, ["FAIL", "FAIL"])
        self.assertIn("-goodbye", output)
        self.assertIn("+hello", output)
        self.assertIn("+$-1", output)

    def test_a_failing_program_fails_the_run(self):
        status, output = self.run_doc("""
            '''sh
            false
            echo never
            '''

            '''python
            import actorkv
            actorkv.Client("./actorkv.sock").no_such_method()
            '''

            '''sh forever
            true
            '''

            '''sh timeout=1
            sleep 5
            '''
            """)
        self.assertEqual(status, 1, output)
        self.assert_outcomes(output, ["FAIL"] * 4)
        self.assertIn("AttributeError", output)
        self.assertIn("should keep running", output)
        self.assertIn("still running after 1 s", output)

    def test_pending_blocks_fail_quietly_until_they_pass(self):
        status, output = self.run_doc("""
            '''resp pending=#99
            > NOSUCHCOMMAND
            +OK
            '''
            """)
        self.assertEqual(status, 0, output)
        self.assert_outcomes(output, ["pending"])
        status, output = self.run_doc("""
            '''resp pending=#99
            > PING
            +PONG
            '''
            """)
        self.assertEqual(status, 1, output)
        self.assertIn("remove the marker", output)

    def test_a_prompt_without_a_command_reads_what_arrives_on_its_connection(self):
        status, output = self.run_doc("""
            '''resp
            > CHANGES config
            *3
            $7
            changes
            $6
            config
            :0
            *3
            $6
            synced
            $6
            config
            :0
            b> PUT config theme dark
            +OK
            >
            *4
            $6
            change
            $6
            config
            :1
            *2
            $5
            theme
            $4
            dark
            '''

            '''resp timeout=1
            > PING
            +PONG
            >
            +PONG
            '''
            """)
        self.assertEqual(status, 1, output)
        self.assert_outcomes(output, ["ok", "FAIL"])
        self.assertIn("-+PONG", output)

    def test_the_server_is_started_with_the_default_paths_and_no_connection_before_the_blocks(self):
        status, output = self.run_doc("""
            '''resp
            > INFO
            $[...]
            # Server
            actorkv_version:[...]
            process_id:[...]
            uptime_in_seconds:[...]
            socket:./actorkv.sock
            data_dir:./actorkv-data
            [...]
            connected_clients:1
            max_clients:[...]
            total_connections_received:1
            rejected_connections:0
            total_commands_processed:1
            [...]
            '''
            """)
        self.assertEqual(status, 0, output)
        self.assert_outcomes(output, ["ok"])

    def test_continues_keeps_the_server_and_without_it_each_block_has_a_fresh_one(self):
        status, output = self.run_doc("""
            '''sh
            actorkv put config theme dark
            echo note > file.txt
            '''

            '''sh continues
            test "$(actorkv get config theme)" = dark
            test -f file.txt
            '''

            '''sh
            ! actorkv get config theme
            test ! -e file.txt
            '''
            """)
        self.assertEqual(status, 0, output)
        self.assert_outcomes(output, ["ok", "ok", "ok"])

    def test_a_block_that_stops_its_server_must_say_so_and_must_stop_it(self):
        status, output = self.run_doc("""
            '''sh stops
            redis-cli -s ./actorkv.sock SHUTDOWN
            '''

            '''sh
            redis-cli -s ./actorkv.sock SHUTDOWN
            '''

            '''sh stops
            true
            '''

            '''sh continues
            true
            '''
            """)
        self.assertEqual(status, 1, output)
        self.assert_outcomes(output, ["ok", "FAIL", "FAIL", "ERROR"])
        self.assertIn("continues, but the block before it stops its server", output)
        self.assertIn("the server exited with status 0 during the block", output)
        self.assertIn("the server still runs 5 s after it", output)

    def test_blocks_that_break_the_convention_fail_the_run(self):
        status, output = self.run_doc("""
            Some text.

                indented code

            '''
            untagged
            '''

            '''sh continues
            true
            '''

            '''json
            {}
            '''

            <!-- not run: -->
            '''sh
            true
            '''

            '''sh frobnicate
            true
            '''

            '''sh continues
            true
            '''

            - a list item

                  code inside the item

            - another, with a continuation

              line
            """)
        self.assertEqual(status, 1, output)
        self.assert_outcomes(output, ["ERROR"] * 8)
        for message in ["an indented code block", "without a language", "```json is not a language",
                        "without a reason", "unknown option(s) frobnicate", "continues, but no block before it is run"]:
            self.assertIn(message, output)


if __name__ == "__main__":
    unittest.main()
