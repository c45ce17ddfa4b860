"""Benchmarks/BENCHMARKS.md is written anew by Benchmarks/run.sh, which copies in the two files
kept across runs: HANDRUNS.md (measurements made by hand, per issue) and HOTPATHS.md (the
profiling rounds). Anything written into BENCHMARKS.md alone would be lost at the next full
run, so these tests check that BENCHMARKS.md holds both files whole, and that every heading
outside them is one that run.sh writes itself.

    python3 -m unittest discover -s Tests/docs
"""

import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS = os.path.join(ROOT, "Benchmarks")


def read(name):
    with open(os.path.join(BENCHMARKS, name), encoding="utf-8") as f:
        return f.read()


def headings(text):
    """The Markdown headings of `text`, outside fenced code blocks."""
    found, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.append(line)
    return found


class BenchmarksRecordTests(unittest.TestCase):
    def test_the_kept_files_are_in_the_report_whole(self):
        report = read("BENCHMARKS.md")
        for name in ("HANDRUNS.md", "HOTPATHS.md"):
            with self.subTest(name=name):
                self.assertIn(read(name), report,
                              "BENCHMARKS.md does not hold Benchmarks/%s as it is: edit that file (run.sh "
                              "copies it into the report) and copy the change into BENCHMARKS.md" % name)

    def test_every_other_section_is_generated(self):
        report = read("BENCHMARKS.md")
        for name in ("HANDRUNS.md", "HOTPATHS.md"):
            report = report.replace(read(name), "")
        script = read("run.sh")
        for heading in headings(report):
            with self.subTest(heading=heading):
                self.assertIn(heading, script,
                              "BENCHMARKS.md has a section run.sh does not write, which its next full run "
                              "would drop: move it into Benchmarks/HANDRUNS.md")

    def test_run_sh_copies_the_kept_files(self):
        script = read("run.sh")
        for name in ("HANDRUNS.md", "HOTPATHS.md"):
            self.assertIn('cat "$HERE/%s"' % name, script)

    def test_headings_skip_code_blocks(self):
        self.assertEqual(headings("# a\n```sh\n# a comment\n```\n## b"), ["# a", "## b"])


if __name__ == "__main__":
    unittest.main()
