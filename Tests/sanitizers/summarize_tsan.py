#!/usr/bin/env python3
"""Summarizes ThreadSanitizer reports (files tsan.PID in a folder): one line per distinct pair of
source lines of the racing accesses, with how many reports had it and one file to read it in.

Usage: summarize_tsan.py FOLDER
"""
import collections
import glob
import os
import re
import sys


def access_sites(report):
    """The source locations (file:line) of each access's top frame in a report."""
    sites = re.findall(r"\n  (?:Previous )?(?:[Rr]ead|[Ww]rite|[Mm]odifying|[Aa]tomic)[^\n]*\n\s+#0 \S+ (\S+)", report)
    return tuple(sorted({os.path.basename(site).rsplit(":", 1)[0] for site in sites}))


def main(folder):
    counts = collections.Counter()
    example = {}
    for path in sorted(glob.glob(os.path.join(folder, "tsan.*"))):
        with open(path, errors="replace") as f:
            text = f.read()
        for report in text.split("==================\nWARNING: ThreadSanitizer: ")[1:]:
            kind = report.split(" (pid", 1)[0]
            key = (kind,) + access_sites(report)
            counts[key] += 1
            example.setdefault(key, path)
    if not counts:
        print("no ThreadSanitizer reports")
        return
    for key, n in counts.most_common():
        print(f"{n:5d}  {key[0]}: {' ~ '.join(key[1:])}  (e.g. {example[key]})")


if __name__ == "__main__":
    main(sys.argv[1])
