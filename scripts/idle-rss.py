#!/usr/bin/env python3
"""The idle footprint of agentry (docs/PERFORMANCE.md, issue 39).

    python3 scripts/idle-rss.py [BINARY] [--wait 4] [--maps]

Starts BINARY (default target/release/agentry) with the examples on a fresh SQLite file, waits
for its listening line, then WAIT seconds, and prints VmRSS, RssAnon, RssFile, the number of
threads and the binary's size; with --maps, the resident kB of each mapping (the binary, the
anonymous memory, the C library) from /proc/PID/smaps. A measurement, not a test."""
import argparse
import collections
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "target", "release", "agentry"))
ap.add_argument("--wait", type=float, default=4.0)
ap.add_argument("--maps", action="store_true")
args = ap.parse_args()

folder = tempfile.mkdtemp()
env = dict(os.environ, RUST_LOG="warn")
server = subprocess.Popen(
    [args.binary, "serve", "--bind", "127.0.0.1:0", "--database-url", f"sqlite://{folder}/idle.db"],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, cwd=folder)
try:
    server.stdout.readline()
    time.sleep(args.wait)
    status = dict(line.split(":", 1) for line in open(f"/proc/{server.pid}/status"))
    fields = ("VmRSS", "RssAnon", "RssFile", "Threads")
    print(" ".join(f"{k} {status[k].strip()}" for k in fields),
          f"binary {os.path.getsize(args.binary) // 1024} kB")
    if args.maps:
        resident = collections.Counter()
        mapping = None
        for line in open(f"/proc/{server.pid}/smaps"):
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                mapping = parts[5] if len(parts) > 5 else "[anonymous]"
            elif line.startswith("Rss:"):
                resident[mapping] += int(line.split()[1])
        for name, kb in resident.most_common(12):
            print(f"  {kb:8d} kB {name}")
finally:
    server.terminate()
    server.wait()
