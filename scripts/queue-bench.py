#!/usr/bin/env python3
"""`just bench --queues`: a queue shared by three PostgreSQL replicas, under load.

    python3 scripts/queue-bench.py [--executions 10000] [--tenants 500] [--work 50]
                                   [--high-share 0.2] [--concurrency 60] [--key-limit 1]
                                   [--replicas 3] [--clients 16] [--probe 100] [--probe-rate 10]
                                   [--binary target/release/agentry]
                                   [--postgres postgres://postgres@127.0.0.1:5432/postgres]

Builds nothing (`just bench` builds the release binary first). Creates a fresh PostgreSQL
database and starts REPLICAS release servers on it (nodes qb1, qb2, ...) with the hidden test
registry (`AGENTRY_TEST_AGENTS=<tmpdir>`) and `AGENTRY_TEST_QUEUE=concurrency=C,keyLimit=K`:
the workflow `tester-queued`, one step that sleeps `work` ms, in a queue keyed by tenant.

1. **Unsaturated**: PROBE executions of `tester-queued` (each its own tenant) and PROBE of
   `tester-unqueued` (the same workflow without a queue), alternating, one every
   1/PROBE_RATE s, each through `POST .../execute` from one client that waits for the result.
   The round trip of each (the same 50 ms of work) and the server's start delay (queued:
   `queue.queuedAt` → the step's start; unqueued: the execution's `startAt` → its step's
   start), with the queue empty: the difference of the medians is what going through the
   queue costs an execution that does not wait (the dequeue overhead).
2. **Saturated**: EXECUTIONS executions over TENANTS tenants (round the ring), a HIGH_SHARE of
   them at priority 10 (the input's `priority`), the rest at 0, submitted by CLIENTS threads
   spread over the replicas through `POST /workflows/tester-queued/stream`, each stream closed
   at its first event (`workflow-queued`: the execution is in the queue; `/execute` would wait
   up to 30 s for each result). `GET /queues/tester-queued` is read every 0.5 s meanwhile (the
   deepest queue seen).
3. Once the queue is empty and every execution ended, every execution's state is read back
   (`GET .../state`): the throughput (executions per second from the first step start to the
   last step end), the start latency (`queue.queuedAt` → `steps.work.startedAt`) p50 and p99
   by priority, how long an execution held its slot (`queue.startedAt` → `endAt`) against its
   step's own time, which replica ran how many (from the step's own log), and, sweeping over the
   recorded step starts and ends (an end at the instant of a start is no overlap), the most
   steps in flight at once and of one tenant, against the limits.

Prints a Markdown table; exits 1 if an execution did not complete or a limit was exceeded.
A benchmark, not a test: the figures depend on the machine (the replicas, PostgreSQL and the
client threads share its cores).
"""
import argparse
import calendar
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WF = "tester-queued"
TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)$")


def ts_ns(s):
    """An RFC 3339 timestamp, in nanoseconds since the epoch (all nine digits kept)."""
    m = TS.match(s)
    if not m:
        raise ValueError(f"not a timestamp: {s!r}")
    y, mo, d, h, mi, se, frac, zone = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(se)))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        zh, zm = int(zone[1:3]), int(zone[-2:])
        secs -= sign * (zh * 3600 + zm * 60)
    ns = int((frac or "0")[:9].ljust(9, "0"))
    return secs * 1_000_000_000 + ns


def pct(samples, p):
    s = sorted(samples)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Replica:
    def __init__(self, binary, url, node, env):
        env = dict(os.environ, **env, AGENTRY_NODE_ID=node, RUST_LOG="warn")
        for k in ("AGENTRY_JWT_SECRET", "AGENTRY_AUTH_STRICT", "OPENAI_API_KEY", "DATABASE_URL"):
            env.pop(k, None)
        self.node = node
        self.proc = subprocess.Popen(
            [binary, "serve", "--bind", "127.0.0.1:0", "--database-url", url],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"replica {node} did not start: {line!r}")
        self.host, self.port = m.group(1), int(m.group(2))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Client:
    """One keep-alive connection to a replica."""

    def __init__(self, replica):
        self.replica = replica
        self.conn = None

    def call(self, method, path, body=None):
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.replica.host, self.replica.port,
                                                       timeout=120)
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                                  headers=headers)
                resp = self.conn.getresponse()
                payload = resp.read()
                return resp.status, json.loads(payload) if payload else None
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise

    def get(self, path):
        status, body = self.call("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body}")
        return body["data"]


def enqueue(replica, workflow, body):
    """POST /stream and close it at the first event, which must be `workflow-queued` for a
    queued workflow. The first event."""
    conn = http.client.HTTPConnection(replica.host, replica.port, timeout=120)
    try:
        conn.request("POST", f"/workflows/{workflow}/stream", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"stream {workflow}: {resp.status} {resp.read()[:300]!r}")
        while True:
            line = resp.readline()
            if not line:
                raise RuntimeError(f"stream {workflow} ended before its first event")
            if line.startswith(b"data: "):
                return json.loads(line[6:])
    finally:
        conn.close()


def probe(replicas, count, rate, work):
    """`count` executions each of `tester-queued` and `tester-unqueued`, alternating, one every
    1/rate s through `/execute` from one client: {workflow: ([ids], [round trips in ms])}."""
    out = {WF: ([], []), "tester-unqueued": ([], [])}
    clients = [Client(r) for r in replicas]
    start = time.monotonic()
    for i in range(2 * count):
        wait = start + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        workflow = WF if i % 2 == 0 else "tester-unqueued"
        eid = f"{workflow}-probe-{i}-{uuid.uuid4().hex[:8]}"
        body = {"input": {"tenant": f"probe-{i}", "work": work}, "options": {"executionId": eid}}
        t = time.perf_counter()
        status, answer = clients[i % len(clients)].call(
            "POST", f"/workflows/{workflow}/execute", body)
        took = (time.perf_counter() - t) * 1000
        if status != 200 or answer["data"]["status"] != "completed":
            raise RuntimeError(f"{workflow} probe: {status} {answer}")
        out[workflow][0].append(eid)
        out[workflow][1].append(took)
    return out


def read_states(replicas, workflow, ids, threads=8):
    states = {}
    lock = threading.Lock()
    chunks = [ids[i::threads] for i in range(threads)]

    def work(n, chunk):
        c = Client(replicas[n % len(replicas)])
        for eid in chunk:
            s = c.get(f"/workflows/{workflow}/executions/{eid}/state")
            with lock:
                states[eid] = s

    ts = [threading.Thread(target=work, args=(n, ch)) for n, ch in enumerate(chunks)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return [states[i] for i in ids]


def wait_ended(client, workflow, total, timeout):
    """Waits until `total` executions of `workflow` ended (execution counts)."""
    deadline = time.monotonic() + timeout
    while True:
        counts = client.get("/api/execution-counts")
        c = next(w["counts"] for w in counts["workflows"] if w["workflowId"] == workflow)
        ended = c.get("completed", 0) + c.get("error", 0) + c.get("cancelled", 0)
        if ended >= total:
            return c
        if time.monotonic() > deadline:
            sys.exit(f"{workflow}: {ended} of {total} ended after {timeout} s: {c}")
        time.sleep(0.5)


def sweep(runs):
    """The most (start, end) intervals open at once; ends first at an equal instant."""
    points = []
    for s, e in runs:
        points.append((s, 1))
        points.append((e, 0))
    points.sort()
    open_, most = 0, 0
    for _, is_start in points:
        open_ += 1 if is_start else -1
        most = max(most, open_)
    return most


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--executions", type=int, default=10_000)
    p.add_argument("--tenants", type=int, default=500)
    p.add_argument("--work", type=int, default=50, help="each step's sleep, ms")
    p.add_argument("--high-share", type=float, default=0.2)
    p.add_argument("--concurrency", type=int, default=60)
    p.add_argument("--key-limit", type=int, default=1)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--probe", type=int, default=100)
    p.add_argument("--probe-rate", type=float, default=10)
    p.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "agentry"))
    p.add_argument("--postgres", default=os.environ.get(
        "AGENTRY_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    a = p.parse_args()
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} is missing: `just bench` builds it (cargo build --release)")

    name = f"agentry_queuebench_{uuid.uuid4().hex[:10]}"
    subprocess.run(["psql", a.postgres, "-qc", f"CREATE DATABASE {name}"], check=True)
    url = a.postgres.split("?", 1)[0].rsplit("/", 1)[0] + "/" + name
    subprocess.run([a.binary, "migrate", "--database-url", url], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp(prefix="agentry-queue-bench-")
    limits = f"concurrency={a.concurrency},keyLimit={a.key_limit}"
    env = {"AGENTRY_TEST_AGENTS": tmp, "AGENTRY_TEST_QUEUE": limits}
    replicas = []
    try:
        replicas = [Replica(a.binary, url, f"qb{i + 1}", env) for i in range(a.replicas)]
        report = run(a, replicas, limits, tmp)
    finally:
        for r in replicas:
            r.stop()
        subprocess.run(["psql", a.postgres, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                       check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    print(report["markdown"])
    if not report["ok"]:
        sys.exit(1)


def run(a, replicas, limits, tmp):
    control = Client(replicas[0])

    # 1. Unsaturated: the queue empty, one execution at a time.
    print(f"probe: {a.probe} queued and {a.probe} unqueued executions at {a.probe_rate}/s",
          file=sys.stderr, flush=True)
    probed = probe(replicas, a.probe, a.probe_rate, a.work)
    q_ids, q_rtt = probed[WF]
    u_ids, u_rtt = probed["tester-unqueued"]
    q_delay = [(ts_ns(s["steps"]["work"]["startedAt"]) - ts_ns(s["queue"]["queuedAt"])) / 1e6
               for s in read_states(replicas, WF, q_ids)]
    u_delay = [(ts_ns(s["steps"]["work"]["startedAt"]) - ts_ns(s["startAt"])) / 1e6
               for s in read_states(replicas, "tester-unqueued", u_ids)]

    # 2. Saturated.
    n = a.executions
    run_tag = uuid.uuid4().hex[:6]
    ids = [f"qb-{run_tag}-{i}" for i in range(n)]
    high_every = round(1 / a.high_share) if a.high_share > 0 else 0
    bodies = []
    for i, eid in enumerate(ids):
        inp = {"tenant": f"t{i % a.tenants}", "work": a.work}
        if high_every and i % high_every == 0:
            inp["priority"] = 10
        bodies.append({"input": inp, "options": {"executionId": eid}})
    print(f"saturated: {n} executions over {a.tenants} tenants, {a.clients} clients, {limits}",
          file=sys.stderr, flush=True)
    errors = []
    depth = {"max": 0, "samples": []}
    submitting = threading.Event()
    submitting.set()

    def watch():
        c = Client(replicas[-1])
        while submitting.is_set():
            try:
                q = c.get(f"/queues/{WF}")
            except Exception as e:  # noqa: BLE001 (a missed sample is no failure)
                print(f"GET /queues/{WF}: {e}", file=sys.stderr)
            else:
                depth["max"] = max(depth["max"], q["queued"])
                depth["samples"].append((time.monotonic(), q["queued"], q["running"]))
            time.sleep(0.5)

    def submit(k):
        r = replicas[k % len(replicas)]
        for i in range(k, n, a.clients):
            try:
                ev = enqueue(r, WF, bodies[i])
                if ev.get("type") != "workflow-queued":
                    errors.append(f"{ids[i]}: first event {ev}")
            except Exception as e:  # noqa: BLE001 (reported, then the run fails)
                errors.append(f"{ids[i]}: {e}")

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    subs = [threading.Thread(target=submit, args=(k,)) for k in range(a.clients)]
    for t in subs:
        t.start()
    for t in subs:
        t.join()
    submitted_s = time.monotonic() - t0
    submitted_at_ns = time.time_ns()
    wait_ended(control, WF, a.probe + n, 600)
    submitting.clear()
    watcher.join()
    print("reading back the states", file=sys.stderr, flush=True)
    states = read_states(replicas, WF, ids)

    # 3. The figures.
    ok = not errors
    not_completed = [s["executionId"] for s in states if s["status"] != "completed"]
    ok = ok and not not_completed
    runs, by_tenant, lat, hold, step_ms = [], {}, {}, [], []
    for s in states:
        if s["status"] != "completed":
            continue
        step = s["steps"]["work"]
        start, end = ts_ns(step["startedAt"]), ts_ns(step["endedAt"])
        runs.append((start, end))
        step_ms.append((end - start) / 1e6)
        hold.append((ts_ns(s["endAt"]) - ts_ns(s["queue"]["startedAt"])) / 1e6)
        by_tenant.setdefault(s["queue"]["key"], []).append((start, end))
        lat.setdefault(s["queue"]["priority"], []).append(
            (start - ts_ns(s["queue"]["queuedAt"])) / 1e6)
    most = sweep(runs)
    most_of_one = max((sweep(r) for r in by_tenant.values()), default=0)
    limits_ok = most <= a.concurrency and most_of_one <= a.key_limit
    ok = ok and limits_ok
    first, last = min(s for s, _ in runs), max(e for _, e in runs)
    span_s = (last - first) / 1e9
    # The runs that started after the last submission: the replicas alone on the machine.
    after = [(st, en) for st, en in runs if st >= submitted_at_ns]
    if len(after) > 1:
        drain_s = (max(e for _, e in after) - min(st for st, _ in after)) / 1e9
        in_use = sum(e - st for st, e in after) / 1e9 / drain_s
        draining = (f"{len(after) / drain_s:,.0f} executions/s over {drain_s:.1f} s, "
                    f"{in_use:.1f} steps running on average")
    else:
        draining = "nothing left once the submissions ended"
    nodes = {}
    with open(os.path.join(tmp, "tools.log")) as f:
        wanted = set(ids)
        for line in f:
            parts = line.split()
            if len(parts) == 6 and parts[0] == "start" and parts[1] in wanted:
                nodes[parts[3]] = nodes.get(parts[3], 0) + 1

    rows = [
        ("replicas", f"{a.replicas} `agentry` processes (`{os.path.relpath(a.binary, ROOT)}`) on one "
                     "PostgreSQL database"),
        ("queue", f"`{limits}` (key: the tenant)"),
        ("executions", f"{n:,} over {a.tenants} tenants, one {a.work} ms step each, "
                       f"{a.high_share:.0%} at priority 10"),
        ("submitted", f"in {submitted_s:.1f} s ({n / submitted_s:,.0f}/s; {a.clients} client "
                      "threads, `/stream` closed at `workflow-queued`)"),
        ("deepest queue seen", f"{depth['max']:,} queued"),
        ("throughput", f"**{n / span_s:,.0f} executions/s** (first step start to last step end: "
                       f"{span_s:.1f} s); the limit allows {a.concurrency * 1000 / a.work:,.0f}/s"),
    ]
    for prio in sorted(lat, reverse=True):
        v = lat[prio]
        rows.append((f"start latency, priority {prio}",
                     f"p50 {pct(v, 50):,.0f} ms, p99 {pct(v, 99):,.0f} ms ({len(v):,} executions)"))
    rows += [
        ("`/execute` round trip, queue empty",
         f"queued p50 {pct(q_rtt, 50):.1f} ms, p99 {pct(q_rtt, 99):.1f} ms; the same workflow "
         f"unqueued p50 {pct(u_rtt, 50):.1f} ms, p99 {pct(u_rtt, 99):.1f} ms "
         f"({a.probe} each, {a.work} ms of work)"),
        ("start delay, queue empty (server side)",
         f"queued (queuedAt → step start) p50 {pct(q_delay, 50):.1f} ms, p99 "
         f"{pct(q_delay, 99):.1f} ms; unqueued (startAt → step start) p50 "
         f"{pct(u_delay, 50):.1f} ms, p99 {pct(u_delay, 99):.1f} ms"),
        ("**dequeue overhead** (round trip p50, queued − unqueued)",
         f"{pct(q_rtt, 50) - pct(u_rtt, 50):.1f} ms"),
        ("a slot's hold (dequeue → the execution's end)",
         f"p50 {pct(hold, 50):,.0f} ms, p99 {pct(hold, 99):,.0f} ms; the step itself p50 "
         f"{pct(step_ms, 50):,.0f} ms, p99 {pct(step_ms, 99):,.0f} ms"),
        ("slots in use on average", f"{sum(hold) / 1e3 / span_s:.1f} of {a.concurrency} "
                                    "(the holds' sum over the run's span)"),
        ("while draining (after the last submission)", draining),
        ("most steps in flight at once", f"{most} (limit {a.concurrency})"),
        ("most steps of one tenant at once", f"{most_of_one} (limit {a.key_limit})"),
        ("limits held", "yes" if limits_ok else "**NO**"),
        ("completed", f"{n - len(not_completed):,} of {n:,}"),
        ("executions by replica", ", ".join(f"{k} {v:,}" for k, v in sorted(nodes.items()))),
    ]
    md = ["| measure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if errors:
        md.append(f"\n{len(errors)} submissions failed, the first: {errors[:3]}")
    if not_completed:
        md.append(f"\nnot completed: {not_completed[:10]}")
    return {"markdown": "\n".join(md), "ok": ok}


if __name__ == "__main__":
    main()
