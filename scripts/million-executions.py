#!/usr/bin/env python3
"""State, resume and list latency with a million executions in the table, next to an empty one.

    python3 scripts/million-executions.py [--rows 1000000] [--binary target/release/agentry]
                                          [--postgres postgres://postgres@127.0.0.1:5432/postgres]

For SQLite and for PostgreSQL: an empty database, then one holding ROWS finished executions of
`expense-approval` (bulk-inserted with SQL, each with a step and two events). For each, the
release binary is started and measured with one keep-alive connection: GET state of an
execution (200 times), POST resume of 100 suspended approvals, GET the executions list (first
page of 20, and by status=suspended) 200 times. Prints p50 and p99 in milliseconds, and a
Markdown table at the end. A benchmark, not a test.
"""
import argparse
import http.client
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

SQLITE_BULK = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
INSERT INTO workflow_executions (id, workflow_id, status, input, context, user_id, start_at,
    updated_at, end_at, result, next_step, version, last_event)
SELECT 'bulk-' || i, 'expense-approval', 'completed',
    '{{"employeeId":"e","amount":10,"category":"travel"}}', '{{}}', NULL,
    strftime('%Y-%m-%dT%H:%M:%S', 'now', '-' || (i + 3600) || ' seconds') || '.000000000+00:00',
    strftime('%Y-%m-%dT%H:%M:%S', 'now', '-' || (i + 3600) || ' seconds') || '.000000000+00:00',
    strftime('%Y-%m-%dT%H:%M:%S', 'now', '-' || (i + 3600) || ' seconds') || '.000000000+00:00',
    '{{"status":"approved"}}', 2, 3, 2
FROM n;
INSERT INTO workflow_steps (execution_id, step_id, status, attempt, input, output, started_at,
    ended_at, failures)
SELECT id, 'check-approval', 'completed', 1, input, '{{"approved":true}}', start_at, end_at, '[]'
FROM workflow_executions WHERE id LIKE 'bulk-%';
INSERT INTO workflow_events (execution_id, seq, type, at, data)
SELECT id, 1, 'workflow-start', start_at, '{{"type":"workflow-start","input":{{}},"resumed":false}}'
FROM workflow_executions WHERE id LIKE 'bulk-%';
INSERT INTO workflow_events (execution_id, seq, type, at, data)
SELECT id, 2, 'workflow-complete', end_at, '{{"type":"workflow-complete","result":{{}}}}'
FROM workflow_executions WHERE id LIKE 'bulk-%';
"""

PG_BULK = """
INSERT INTO workflow_executions (id, workflow_id, status, input, context, user_id, start_at,
    updated_at, end_at, result, next_step, version, last_event)
SELECT 'bulk-' || i, 'expense-approval', 'completed',
    '{{"employeeId":"e","amount":10,"category":"travel"}}'::json, '{{}}'::json, NULL,
    now() - (i + 3600) * interval '1 second', now() - (i + 3600) * interval '1 second',
    now() - (i + 3600) * interval '1 second', '{{"status":"approved"}}'::json, 2, 3, 2
FROM generate_series(1, {rows}) i;
INSERT INTO workflow_steps (execution_id, step_id, status, attempt, input, output, started_at,
    ended_at, failures)
SELECT id, 'check-approval', 'completed', 1, input, '{{"approved":true}}'::json, start_at, end_at,
    '[]'::json
FROM workflow_executions WHERE id LIKE 'bulk-%';
INSERT INTO workflow_events (execution_id, seq, type, at, data)
SELECT id, s, CASE s WHEN 1 THEN 'workflow-start' ELSE 'workflow-complete' END, start_at,
    '{{"type":"workflow-start","input":{{}},"resumed":false}}'::json
FROM workflow_executions, generate_series(1, 2) s WHERE id LIKE 'bulk-%';
ANALYZE;
"""


def start(binary, url):
    env = dict(os.environ, RUST_LOG="warn")
    for k in ("AGENTRY_JWT_SECRET", "OPENAI_API_KEY", "DATABASE_URL"):
        env.pop(k, None)
    proc = subprocess.Popen(
        [binary, "serve", "--bind", "127.0.0.1:0", "--database-url", url],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://([\d.]+):(\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"the server did not start: {line!r}")
    return proc, m.group(1), int(m.group(2))


class Client:
    def __init__(self, host, port):
        self.conn = http.client.HTTPConnection(host, port, timeout=60)

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        data = json.dumps(body) if body is not None else None
        t = time.perf_counter()
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        payload = resp.read()
        elapsed = (time.perf_counter() - t) * 1000
        if resp.status >= 300:
            sys.exit(f"{method} {path}: {resp.status} {payload[:200]!r}")
        return elapsed, json.loads(payload)


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def measure(binary, url):
    proc, host, port = start(binary, url)
    try:
        c = Client(host, port)
        expense = {"input": {"employeeId": "e-1", "amount": 5000, "category": "travel"}}
        ids = []
        for _ in range(100):
            _, body = c.call("POST", "/workflows/expense-approval/execute", expense)
            ids.append(body["data"]["executionId"])
        out = {}
        state = f"/workflows/expense-approval/executions/{ids[0]}/state"
        for _ in range(20):
            c.call("GET", state)
        out["state"] = [c.call("GET", state)[0] for _ in range(200)]
        lst = "/workflows/expense-approval/executions?limit=20"
        out["list"] = [c.call("GET", lst)[0] for _ in range(200)]
        sus = "/workflows/expense-approval/executions?status=suspended&limit=20"
        out["list by status"] = [c.call("GET", sus)[0] for _ in range(200)]
        resume = {"resumeData": {"approved": True, "managerId": "m-1"}}
        out["resume"] = [
            c.call("POST", f"/workflows/expense-approval/executions/{i}/resume", resume)[0]
            for i in ids
        ]
        return {k: (statistics.median(v), pct(v, 99)) for k, v in out.items()}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def migrate(binary, url):
    subprocess.run([binary, "migrate", "--database-url", url], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--binary", default="target/release/agentry")
    ap.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    a = ap.parse_args()
    results = []
    tmp = tempfile.mkdtemp()
    for kind in ("sqlite", "postgres"):
        for rows in (0, a.rows):
            if kind == "sqlite":
                path = os.path.join(tmp, f"m-{rows}.db")
                url = f"sqlite://{path}"
                migrate(a.binary, url)
                if rows:
                    t = time.time()
                    db = sqlite3.connect(path)
                    db.executescript(SQLITE_BULK.format(rows=rows))
                    db.commit()
                    db.close()
                    print(f"sqlite: {rows} rows inserted in {time.time() - t:.0f} s", flush=True)
                drop = None
            else:
                name = f"agentry_million_{uuid.uuid4().hex[:8]}"
                subprocess.run(["psql", a.postgres, "-qc", f"CREATE DATABASE {name}"], check=True)
                url = a.postgres.rsplit("/", 1)[0] + "/" + name
                migrate(a.binary, url)
                if rows:
                    t = time.time()
                    subprocess.run(["psql", url, "-qc", PG_BULK.format(rows=rows)], check=True)
                    print(f"postgres: {rows} rows inserted in {time.time() - t:.0f} s", flush=True)
                drop = name
            try:
                r = measure(a.binary, url)
            finally:
                if drop:
                    subprocess.run(["psql", a.postgres, "-qc",
                                    f"DROP DATABASE IF EXISTS {drop} WITH (FORCE)"], check=False)
            for op, (p50, p99) in r.items():
                print(f"{kind:8} {rows:>8} rows  {op:15} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms",
                      flush=True)
                results.append((kind, rows, op, p50, p99))
    print("\n| database | executions in the table | operation | p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    for kind, rows, op, p50, p99 in results:
        print(f"| {kind} | {rows:,} | {op} | {p50:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    main()
