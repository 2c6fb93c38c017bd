#!/usr/bin/env python3
"""`just bench`: agentry under load on this machine, next to the machine's limits.

    python3 scripts/bench.py [--seconds 10] [--connections 32] [--backends sqlite,postgres]
                             [--postgres postgres://postgres@127.0.0.1:5432/postgres]
                             [--million] [--queues] [--out bench-results] [--bin-dir DIR]
                             [--db-prefix agentry_bench]

Builds nothing (the justfile recipe builds the release binaries first). For each backend: the
limits first (a bare actix-web handler serving GET /agents's bytes from memory, measured with
wrk like the server; the database's raw commit rate: empty transactions and one-row inserts on a
pool opened as the server opens its own), then a fresh database and the real server, and each
case for SECONDS at CONNECTIONS connections with wrk (and a one-connection latency run):
GET /agents, POST /agents/writer/text (offline model), POST /agents/assistant/text with one tool
call held in memory and durable, word-count execute and the same workflow written as a
definition (word-count-dsl, served from crates/agentry-bench/definitions), order-fulfillment
execute; with agentry-bench: the expense-approval cycle, the assistant's stream (time to first and
last event), 1,000 workflow streams open at once. The server's RSS (idle, under load, after) and
CPU time per request come from /proc.

Then, per core and per step: word-count's executions/s with the server on one core and per
agentry CPU-second; on PostgreSQL, word-count against a private PostgreSQL server (initdb in a
temporary directory, its own port, every process on CPU 0, fsync and synchronous_commit on) with
the server on CPU 1: executions/s and executions per PostgreSQL CPU-second (its processes'
utime + stime from /proc). The hidden test registry's chains of no-op steps (`tester-chain-1`,
`-10`, `-100`; agentry-bench steps) give the cost of one durable step, the interval between two
steps' calls (the engine calls a step only once the previous one's checkpoint is committed):
p50 and p99 unloaded (tester-chain-100, one client) and loaded (tester-chain-10, CONNECTIONS
clients), and executions/s by steps per workflow. Then word-count's executions/s and
tester-chain-10's step latency on a fresh database holding 0, 10,000 and 100,000 finished
executions (1,000,000 too with --million), filled with scripts/million-executions.py's SQL. On
PostgreSQL, the chains and the stored executions run on the private server too (away from other
users of the shared one), each case with PostgreSQL's CPU time per execution.

With --million, scripts/million-executions.py also measures state and resume latency with
1,000,000 executions in the table. With --soak MINUTES, the
server (SQLite) then takes word-count and GET /agents load for that long while its RSS is read
every minute: the first and the last minute's RSS, and their difference. With --queues, only
scripts/queue-bench.py runs (three release replicas on one fresh PostgreSQL database, 10,000
executions through one queue; its own arguments after `--`, e.g. `--queues -- --executions
2000`): its table is printed and written to OUT/queues.md.

The load generator shares the machine's cores with the server: where `taskset` works, the server
runs on CPU 1 and the load generator on CPU 0 (so the server has one core). Writes
OUT/results.json and OUT/results.md, and prints the Markdown table.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
AGENTRY = os.path.join(RELEASE, "agentry")
BENCH = os.path.join(RELEASE, "agentry-bench")
WRK_LUA = os.path.join(ROOT, "scripts", "bench-wrk.lua")
# Definitions served beside the examples: word-count-dsl, word-count written as a definition.
DEFINITIONS = os.path.join(ROOT, "crates", "agentry-bench", "definitions")
TICKS = os.sysconf("SC_CLK_TCK")
PINNED = shutil.which("taskset") is not None and os.cpu_count() >= 2


def pin(cpu, argv):
    return ["taskset", "-c", str(cpu)] + argv if PINNED else argv


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def bench_line(out):
    for line in out.splitlines():
        if line.startswith("BENCH "):
            yield json.loads(line[len("BENCH "):])


class Server:
    """The release agentry on a fresh database, pinned to CPU 1 (with `test_agents`, a directory:
    the hidden test registry too, `tester-chain-N` among it)."""

    def __init__(self, url, test_agents=None):
        env = dict(os.environ, RUST_LOG="warn")
        for k in ("AGENTRY_JWT_SECRET", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTRY_TEST_AGENTS"):
            env.pop(k, None)
        if test_agents:
            env["AGENTRY_TEST_AGENTS"] = test_agents
            env["AGENTRY_TEST_CHAINS"] = "1"
        self.proc = subprocess.Popen(
            pin(1, [AGENTRY, "serve", "--bind", "127.0.0.1:0", "--database-url", url,
                        "--definitions", DEFINITIONS]),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"the server did not start: {line!r}")
        self.base = f"http://{m.group(1)}:{m.group(2)}"
        self.pid = self.proc.pid
        time.sleep(0.5)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def wrk(url, seconds, connections, method="GET", body=""):
    env = dict(os.environ, BENCH_METHOD=method, BENCH_BODY=body)
    threads = min(2, connections)
    out = subprocess.run(
        pin(0, ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
                "-s", WRK_LUA, url]),
        env=env, capture_output=True, text=True, check=True).stdout
    r = next(bench_line(out))
    r["rate"] = r["requests"] / (r["duration_us"] / 1e6)
    return r


def tool(*args):
    out = subprocess.run(pin(0, [BENCH, *args]), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"agentry-bench {args[0]} failed: {out.stderr}")
    return list(bench_line(out.stdout))


WRK_CASES = [
    ("GET /agents", "GET", "/agents", ""),
    ("POST /agents/writer/text (offline)", "POST", "/agents/writer/text",
     json.dumps({"input": "Write one line about the sea."})),
    # Durable agent runs (issue "durable agent runs"): one tool call, held in memory and durable.
    ("POST /agents/assistant/text, one tool (in memory)", "POST", "/agents/assistant/text",
     json.dumps({"input": "What is the weather in Paris?"})),
    ("POST /agents/assistant/text, one tool, durable", "POST", "/agents/assistant/text",
     json.dumps({"input": "What is the weather in Paris?", "options": {"durable": True}})),
    ("word-count execute", "POST", "/workflows/word-count/execute",
     json.dumps({"input": {"text": "the quick brown fox jumps over the lazy dog"}})),
    # The same workflow as a definition (issue 37: at most 1.5x the compiled one's cost).
    ("word-count-dsl execute (definition)", "POST", "/workflows/word-count-dsl/execute",
     json.dumps({"input": {"text": "the quick brown fox jumps over the lazy dog"}})),
    ("order-fulfillment execute", "POST", "/workflows/order-fulfillment/execute",
     json.dumps({"input": {"orderId": "o-1", "items": [{"sku": "A", "quantity": 2, "unitPrice": 10}],
                           "express": True}})),
]


def same_word_count(base):
    """word-count and word-count-dsl give the same result: the side-by-side cases compare like
    with like."""
    body = next(c[3] for c in WRK_CASES if c[0] == "word-count execute").encode()
    results = []
    for workflow in ("word-count", "word-count-dsl"):
        request = urllib.request.Request(f"{base}/workflows/{workflow}/execute", data=body,
                                         headers={"Content-Type": "application/json"})
        results.append(json.load(urllib.request.urlopen(request))["data"].get("result"))
    if results[0] != results[1] or results[0] is None:
        sys.exit(f"word-count and word-count-dsl differ: {results[0]!r} and {results[1]!r}")


def measure_server_case(server, run):
    """Runs `run()` against the server, adding its RSS under load and CPU per request."""
    cpu0 = cpu_seconds(server.pid)
    r = run()
    r["cpu_ms_per_request"] = (cpu_seconds(server.pid) - cpu0) * 1e3 / max(r["requests"], 1)
    r["rss_kb"] = rss_kb(server.pid)
    return r


def backend(name, url, args):
    results = {"backend": name, "cases": []}
    # The limits, right before the server.
    probe = Server(url)
    agents_bytes = urllib.request.urlopen(probe.base + "/agents").read()
    probe.stop()
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(agents_bytes)
    bare = subprocess.Popen(pin(1, [BENCH, "bare", "--bind", "127.0.0.1:39871", "--body", f.name]))
    time.sleep(0.5)
    limit_http = wrk("http://127.0.0.1:39871/agents", args.seconds, args.connections)
    bare.terminate()
    bare.wait()
    os.unlink(f.name)
    results["limit_http"] = limit_http
    results["limit_db"] = tool("commit-rate", "--database", url, "--connections",
                               str(args.connections), "--seconds", str(args.seconds))

    server = Server(url)
    results["rss_idle_kb"] = rss_kb(server.pid)
    same_word_count(server.base)
    for label, method, path, body in WRK_CASES:
        r = measure_server_case(
            server, lambda: wrk(server.base + path, args.seconds, args.connections, method, body))
        one = wrk(server.base + path, max(2, args.seconds // 2), 1, method, body)
        r.update(case=label, latency_1conn=one)
        results["cases"].append(r)
    for sub, label in (("cycle", "expense-approval cycle"), ("agent-stream", None)):
        r = measure_server_case(server, lambda: tool(
            sub, "--url", server.base, "--connections", str(args.connections),
            "--seconds", str(args.seconds))[0])
        if label:
            r["case"] = label
        results["cases"].append(r)
    r = tool("streams", "--url", server.base, "--count", "1000", "--pid", str(server.pid))[0]
    results["cases"].append(r)
    time.sleep(1)
    results["rss_after_kb"] = rss_kb(server.pid)
    server.stop()
    # Per core and per step.
    wc = next(r for r in results["cases"] if r["case"] == "word-count execute")
    results["per_core"] = {"agentry": {
        "rate": wc["rate"], "per_agentry_cpu_s": 1e3 / wc["cpu_ms_per_request"]
        if wc["cpu_ms_per_request"] else None}}
    if name == "sqlite":
        results["steps"] = steps_and_growth(name, args, args.tmp)
        return results
    # The rest on a private PostgreSQL, all of it on CPU 0 (the shared one is not pinned).
    print(f"   {name}: a private PostgreSQL on CPU 0", file=sys.stderr, flush=True)
    pg = PrivatePostgres()
    try:
        results["per_core"]["postgres"] = per_postgres_core(args, pg)
        results["steps"] = steps_and_growth(name, args, args.tmp, pg)
    finally:
        pg.stop()
    return results


# Per core and per step (issue 39, item 5).

WORD_COUNT = next(c for c in WRK_CASES if c[0] == "word-count execute")
# Stored executions the growth runs start with (--million adds 1,000,000).
STORED_LEVELS = (0, 10_000, 100_000)


def load_million():
    """scripts/million-executions.py as a module: its bulk fill (SQLITE_BULK, PG_BULK)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "million_executions", os.path.join(ROOT, "scripts", "million-executions.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_postgres_cpu(pg, run):
    """Runs `run()`, adding the CPU time of the private PostgreSQL `pg` per request."""
    if pg is None:
        return run()
    cpu0 = tree_cpu_seconds(pg.pid)
    r = run()
    r["postgres_cpu_ms_per_request"] = (tree_cpu_seconds(pg.pid) - cpu0) * 1e3 / max(
        r["requests"], 1)
    return r


def word_count_load(server, seconds, connections, pg=None):
    return with_postgres_cpu(pg, lambda: measure_server_case(server, lambda: wrk(
        server.base + WORD_COUNT[2], seconds, connections, "POST", WORD_COUNT[3])))


def chain(server, steps, connections, seconds, pg=None):
    """`agentry-bench steps` on `tester-chain-<steps>`: executions/s and the step intervals, and
    the CPU time of the server (and of PostgreSQL) per execution over the load alone."""
    cpu = ["--cpu-of", f"agentry={server.pid}"] + (["--cpu-of", f"postgres={pg.pid}"] if pg else [])
    r = tool("steps", "--url", server.base, "--workflow", f"tester-chain-{steps}",
             "--connections", str(connections), "--seconds", str(seconds),
             "--clock-ticks", str(TICKS), *cpu)[0]
    r["cpu_ms_per_request"] = r.pop("agentry_cpu_ms_per_request")
    r["rss_kb"] = rss_kb(server.pid)
    return r


def proc_stat(pid):
    """(ppid, utime + stime, cutime + cstime) of `pid`, in seconds; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS,
            (int(fields[13]) + int(fields[14])) / TICKS)


def tree_cpu_seconds(root):
    """CPU seconds of process `root` and its children, the ended ones included (a process's
    ended and waited-for children count in its cutime and cstime)."""
    own = proc_stat(root)
    if own is None:
        return 0.0
    total = own[1] + own[2]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st and st[0] == root:
                total += st[1] + st[2]
    return total


class PrivatePostgres:
    """A PostgreSQL server of its own (initdb in a temporary directory, its own port), every
    process of it on CPU 0: fsync and synchronous_commit on, the defaults otherwise."""

    def __init__(self):
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                check=True).stdout.strip()
        self.pg_ctl = os.path.join(bindir, "pg_ctl")
        self.dir = tempfile.mkdtemp(prefix="agentry-bench-pg-")
        self.data = os.path.join(self.dir, "data")
        # initdb refuses root: as root, the cluster is the postgres user's.
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.dir, "postgres", "postgres")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        subprocess.run(self.as_user + [os.path.join(bindir, "initdb"), "-D", self.data, "-A",
                                       "trust", "-U", "postgres", "--no-sync"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                   "-c fsync=on -c synchronous_commit=on")
        subprocess.run(self.as_user + pin(0, [self.pg_ctl, "-D", self.data, "-l",
                                              os.path.join(self.dir, "log"), "-w", "-o",
                                              options, "start"]),
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self):
        subprocess.run(self.as_user + [self.pg_ctl, "-D", self.data, "-m", "fast", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def per_postgres_core(args, pg):
    """word-count against the private PostgreSQL `pg` on CPU 0, the server on CPU 1:
    executions/s, and executions per CPU-second of PostgreSQL's processes and of the server."""
    subprocess.run(["psql", pg.url, "-qc", "CREATE DATABASE agentry_bench"], check=True)
    server = Server(pg.url.rsplit("/", 1)[0] + "/agentry_bench")
    try:
        # A second of warm-up (the pool's connections, the first pages).
        wrk(server.base + WORD_COUNT[2], 1, args.connections, "POST", WORD_COUNT[3])
        pg0, ag0 = tree_cpu_seconds(pg.pid), cpu_seconds(server.pid)
        r = wrk(server.base + WORD_COUNT[2], args.seconds, args.connections, "POST",
                WORD_COUNT[3])
        pg_cpu, ag_cpu = tree_cpu_seconds(pg.pid) - pg0, cpu_seconds(server.pid) - ag0
    finally:
        server.stop()
    subprocess.run(["psql", pg.url, "-qc", "DROP DATABASE agentry_bench WITH (FORCE)"])
    seconds = r["duration_us"] / 1e6
    return {"rate": r["rate"], "requests": r["requests"], "p50_us": r["p50_us"],
            "p99_us": r["p99_us"], "seconds": seconds,
            "postgres_cpu_s": pg_cpu, "agentry_cpu_s": ag_cpu,
            "postgres_cores_busy": pg_cpu / seconds, "agentry_cores_busy": ag_cpu / seconds,
            "per_postgres_cpu_s": r["requests"] / pg_cpu if pg_cpu else None,
            "per_agentry_cpu_s": r["requests"] / ag_cpu if ag_cpu else None}


def fresh_database(name, args, tmp, pg=None):
    """A new empty database of the backend (on PostgreSQL, of the private server `pg`): its URL
    and what removes it."""
    if name == "sqlite":
        path = f"{tmp}/steps-{uuid.uuid4().hex}.db"
        return f"sqlite://{path}", lambda: [
            os.path.exists(p) and os.unlink(p) for p in (path, path + "-wal", path + "-shm")]
    admin = pg.url if pg else args.postgres
    db = f"{args.db_prefix}_{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {db}"], check=True)
    return admin.rsplit("/", 1)[0] + "/" + db, lambda: subprocess.run(
        ["psql", admin, "-qc", f"DROP DATABASE {db} WITH (FORCE)"])


def bulk_fill(name, url, rows):
    """`rows` finished executions, with SQL (scripts/million-executions.py's bulk fill)."""
    million = load_million()
    subprocess.run([AGENTRY, "migrate", "--database-url", url], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not rows:
        return 0.0
    t = time.time()
    if name == "sqlite":
        import sqlite3
        db = sqlite3.connect(url[len("sqlite://"):])
        db.executescript(million.SQLITE_BULK.format(rows=rows))
        db.commit()
        db.close()
    else:
        subprocess.run(["psql", url, "-qc", million.PG_BULK.format(rows=rows)], check=True,
                       stdout=subprocess.DEVNULL)
    return time.time() - t


def steps_and_growth(name, args, tmp, pg=None):
    """Step latency and executions/s with the steps per workflow, then with the stored
    executions: a fresh database for each level, filled with SQL before the server starts (on
    PostgreSQL, of the private server `pg`, whose CPU time each case adds)."""
    out = {"chains": [], "stored": []}
    levels = STORED_LEVELS + ((1_000_000,) if args.million else ())
    agents_dir = tempfile.mkdtemp(prefix="agentry-bench-tester-", dir=tmp)
    for stored in levels:
        print(f"   {name}: {stored:,} stored executions", file=sys.stderr, flush=True)
        url, drop = fresh_database(name, args, tmp, pg)
        try:
            fill_s = bulk_fill(name, url, stored)
            server = Server(url, test_agents=agents_dir)
            try:
                level = {"stored": stored, "fill_s": fill_s}
                if stored == 0:
                    # Unloaded: one execution at a time; loaded: CONNECTIONS clients.
                    out["chains"].append(chain(server, 100, 1, args.seconds, pg))
                    for steps in (1, 10, 100):
                        r = chain(server, steps, args.connections, args.seconds, pg)
                        out["chains"].append(r)
                        if steps == 10:
                            level["chain10"] = r
                else:
                    level["chain10"] = chain(server, 10, args.connections, args.seconds, pg)
                level["word_count"] = word_count_load(server, args.seconds, args.connections, pg)
                out["stored"].append(level)
            finally:
                server.stop()
        finally:
            drop()
    shutil.rmtree(agents_dir, ignore_errors=True)
    return out


def soak(minutes, args):
    """RSS of a server under sustained load, read once a minute."""
    tmp = tempfile.mkdtemp(prefix="agentry-soak-")
    server = Server(f"sqlite://{tmp}/soak.db")
    rss = [rss_kb(server.pid)]
    body = next(c[3] for c in WRK_CASES if c[0] == "word-count execute")
    for _ in range(minutes):
        # Half a minute of durable executions, half a minute of reads: both paths, for a minute.
        wrk(server.base + "/workflows/word-count/execute", 30, args.connections, "POST", body)
        wrk(server.base + "/agents", 30, args.connections)
        rss.append(rss_kb(server.pid))
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return {"minutes": minutes, "rss_kb_by_minute": rss,
            "growth_first_to_last": (rss[-1] - rss[1]) / rss[1] if len(rss) > 2 else 0}


def ms(us):
    return f"{us / 1000:.2f}"


def markdown(all_results):
    lines = []
    for b in all_results["backends"]:
        lh = b["limit_http"]["rate"]
        db = {r["case"]: r["rate"] for r in b["limit_db"]}
        lines.append(f"\n### {b['backend']}\n")
        lines.append(f"Limits: bare actix-web handler {lh:,.0f} req/s; database: "
                     + ", ".join(f"{k} {v:,.0f}/s" for k, v in db.items()) + ".\n")
        lines.append("| case | req/s | p50 ms | p99 ms | p99.9 ms | 1-conn p50 ms | CPU ms/req | RSS MB | ratio to limit |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for r in b["cases"]:
            one = r.get("latency_1conn")
            limit = ""
            if r["case"] in ("GET /agents", "POST /agents/writer/text (offline)"):
                limit = f"{r['rate'] / lh:.0%} of the bare handler"
            elif "execute" in r["case"] or "cycle" in r["case"]:
                limit = f"{r['rate'] / db.get('one-row insert', 1):.0%} of one-row commits"
            rate = f"{r['rate']:,.0f}" if "streams" not in r["case"] else f"{r.get('streams')} open"
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r["case"], rate, ms(r["p50_us"]), ms(r["p99_us"]), ms(r["p999_us"]),
                ms(one["p50_us"]) if one else "",
                f"{r['cpu_ms_per_request']:.3f}" if "cpu_ms_per_request" in r else "",
                f"{r['rss_kb'] / 1024:.1f}" if "rss_kb" in r else
                f"{r.get('rss_per_stream_kb', 0):.1f} KB/stream",
                limit))
            if "first_event" in r:
                fe = r["first_event"]
                lines.append(f"| ↳ time to first event | | {ms(fe['p50_us'])} | {ms(fe['p99_us'])} | {ms(fe['p999_us'])} | | | | |")
        cpu = {r["case"]: r.get("cpu_ms_per_request") for r in b["cases"]}
        compiled, dsl = cpu.get("word-count execute"), cpu.get("word-count-dsl execute (definition)")
        if compiled and dsl:
            lines.append(f"\nword-count as a definition: {dsl / compiled:.2f}x the compiled one's "
                         "CPU per execution (issue 37's limit: 1.5x; the exact figure is "
                         "scripts/callgrind-per-request.py's).")
        lines.append(f"\nRSS idle {b['rss_idle_kb'] / 1024:.1f} MB, after {b['rss_after_kb'] / 1024:.1f} MB.")
        if "steps" in b:
            lines.extend(per_step_markdown(b))
    return "\n".join(lines)


def per_step_markdown(b):
    """The backend's "per core and per step" tables."""
    def step_ms(r):
        s = r["step"]
        return (f"{ms(s['p50_us'])} | {ms(s['p99_us'])} | {ms(s['mean_us'])}"
                if s["intervals"] else "– | – | –")

    def per(v):
        return f"{v:,.0f}" if v else "–"

    lines = [f"\n#### {b['backend']}: per core and per step\n",
             "| figure | value |", "|---|---|"]
    ag = b["per_core"]["agentry"]
    lines.append(f"| executions/s per agentry core (word-count, server on one core) | "
                 f"{ag['rate']:,.0f}/s; {per(ag['per_agentry_cpu_s'])} per agentry CPU-second |")
    pg = b["per_core"].get("postgres")
    if pg:
        lines.append(
            f"| per PostgreSQL core (word-count; a private PostgreSQL on CPU 0, the server on "
            f"CPU 1) | {pg['rate']:,.0f}/s (p50 {ms(pg['p50_us'])} ms, p99 {ms(pg['p99_us'])} "
            f"ms); {per(pg['per_postgres_cpu_s'])} per PostgreSQL CPU-second "
            f"({pg['postgres_cores_busy']:.2f} cores busy), {per(pg['per_agentry_cpu_s'])} per "
            f"agentry CPU-second ({pg['agentry_cores_busy']:.2f} cores busy) |")
    chains = b["steps"]["chains"]
    for r in chains:
        if r["chain_steps"] == 100 and r["connections"] == 1:
            lines.append(f"| step latency, unloaded (tester-chain-100, one client), p50 / p99 ms | "
                         f"{ms(r['step']['p50_us'])} / {ms(r['step']['p99_us'])} |")
        if r["chain_steps"] == 10 and r["connections"] > 1:
            lines.append(f"| step latency, loaded (tester-chain-10, {r['connections']} clients), "
                         f"p50 / p99 ms | {ms(r['step']['p50_us'])} / {ms(r['step']['p99_us'])} |")
    lines.append("\nWith the steps per workflow (a step: the interval between two steps' calls):\n")
    def cpu(r):
        pg_ms = r.get("postgres_cpu_ms_per_request")
        return f"{r['cpu_ms_per_request']:.3f}" + (f" | {pg_ms:.3f}" if pg else "")

    pg_head, pg_rule = (" PostgreSQL CPU ms/execution |", "---|") if pg else ("", "")
    lines.append("| workflow | clients | executions/s | steps/s | execute p50 ms | execute p99 ms "
                 "| step p50 ms | step p99 ms | step mean ms | agentry CPU ms/execution |"
                 + pg_head)
    lines.append("|---|---|---|---|---|---|---|---|---|---|" + pg_rule)
    for r in chains:
        lines.append(f"| {r['workflow']} | {r['connections']} | {r['rate']:,.0f} | "
                     f"{r['steps_per_s']:,.0f} | {ms(r['p50_us'])} | {ms(r['p99_us'])} | "
                     f"{step_ms(r)} | {cpu(r)} |")
    where = " of the private PostgreSQL" if pg else ""
    lines.append(f"\nWith the stored executions (a fresh database{where} filled with SQL for "
                 "each):\n")
    lines.append("| stored executions | word-count executions/s | word-count p99 ms "
                 "| agentry CPU ms/execution |" + pg_head
                 + " tester-chain-10 executions/s | step p50 ms | step p99 ms | step mean ms |")
    lines.append("|---|---|---|---|---|---|---|---|" + pg_rule)
    for lv in b["steps"]["stored"]:
        wc, c10 = lv["word_count"], lv["chain10"]
        lines.append(f"| {lv['stored']:,} | {wc['rate']:,.0f} | {ms(wc['p99_us'])} | {cpu(wc)} | "
                     f"{c10['rate']:,.0f} | {step_ms(c10)} |")
    return lines


def queues(args):
    """Only the queue benchmark: its table, printed and written to OUT/queues.md."""
    if not os.path.exists(AGENTRY):
        sys.exit(f"{AGENTRY} is missing: `just bench` builds it (cargo build --release)")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "queue-bench.py"),
                          "--binary", AGENTRY, "--postgres", args.postgres, *args.queue_args],
                         stdout=subprocess.PIPE, text=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "queues.md"), "w") as f:
        f.write(out.stdout)
    print(out.stdout, end="")
    if out.returncode != 0:
        sys.exit(f"scripts/queue-bench.py failed ({out.returncode})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--postgres", default=os.environ.get(
        "AGENTRY_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--db-prefix", default="agentry_bench",
                   help="the PostgreSQL databases it makes (and drops) are named PREFIX_<random>")
    p.add_argument("--million", action="store_true")
    p.add_argument("--queues", action="store_true",
                   help="run only the queue benchmark (scripts/queue-bench.py)")
    p.add_argument("queue_args", nargs="*", help="after --: scripts/queue-bench.py's arguments")
    p.add_argument("--soak", type=int, default=0, metavar="MINUTES")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    p.add_argument("--bin-dir", default=RELEASE, metavar="DIR",
                   help="where the agentry and agentry-bench binaries are (to compare two builds)")
    args = p.parse_args()
    global AGENTRY, BENCH
    AGENTRY = os.path.join(args.bin_dir, "agentry")
    BENCH = os.path.join(args.bin_dir, "agentry-bench")
    if args.queues:
        queues(args)
        return
    if args.queue_args:
        p.error(f"unexpected arguments {args.queue_args} (they go with --queues)")
    for tool_path in (AGENTRY, BENCH):
        if not os.path.exists(tool_path):
            sys.exit(f"{tool_path} is missing: `just bench` builds it (cargo build --release)")
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: run scripts/install-bench-deps.sh")
    all_results = {
        "machine": {"cpus": os.cpu_count(), "pinned": PINNED,
                    "kernel": os.uname().release, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "seconds": args.seconds, "connections": args.connections, "backends": []}
    tmp = tempfile.mkdtemp(prefix="agentry-bench-")
    args.tmp = tmp
    for name in args.backends.split(","):
        if name == "sqlite":
            url = f"sqlite://{tmp}/bench-{uuid.uuid4().hex}.db"
        else:
            db = f"{args.db_prefix}_{uuid.uuid4().hex[:12]}"
            subprocess.run(["psql", args.postgres, "-qc", f"CREATE DATABASE {db}"], check=True)
            url = args.postgres.rsplit("/", 1)[0] + "/" + db
        print(f"== {name}", file=sys.stderr)
        all_results["backends"].append(backend(name, url, args))
        if name != "sqlite":
            subprocess.run(["psql", args.postgres, "-qc", f"DROP DATABASE {db} WITH (FORCE)"])
    shutil.rmtree(tmp, ignore_errors=True)
    if args.million:
        out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "million-executions.py"),
                              "--binary", AGENTRY, "--postgres", args.postgres],
                             capture_output=True, text=True)
        all_results["million"] = out.stdout
    if args.soak:
        all_results["soak"] = soak(args.soak, args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(all_results, f, indent=2)
    md = markdown(all_results)
    if args.million:
        md += "\n\n" + all_results["million"]
    if args.soak:
        s = all_results["soak"]
        md += "\n\nRSS under sustained load (MB, each minute): " + ", ".join(
            f"{kb / 1024:.1f}" for kb in s["rss_kb_by_minute"]) + \
            f"; first to last minute: {s['growth_first_to_last']:+.0%}."
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
