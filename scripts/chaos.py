#!/usr/bin/env python3
"""Chaos on PostgreSQL replicas: what an operator's worst day does to acknowledged executions.

Three `agentry` replicas share one PostgreSQL database (a fresh one, created and dropped here) with
a short lease. A client load runs the example workflows against all of them at once: `countdown`
executes with caller-chosen ids, retried on every failure until answered; `expense-approval`
executes whose resumes race on several replicas; cancels; state reads and lists abandoned
mid-answer; streams abandoned after their first event. Meanwhile a chaos loop sends kill -9,
SIGSTOP/SIGCONT (sometimes past the lease) and SIGTERM to the replicas, never to all of them at
once, and restarts what it stopped.

Then it waits for quiescence and checks through the API:
  - nothing lost: every execution an answer acknowledged exists;
  - nothing stuck: no execution is running or queued, every expense was decided;
  - nothing in `error`;
  - no step committed twice (each step completes once in an execution's event log), and no
    acknowledged resume lost (an expense suspends once);
  - every resume one winner (at most one resume answered 200, and the result names a manager
    whose resume was sent, the winner's when one was answered);
  - no 500 (nor any 5xx but 503) answered;
  - no replica logged a poisoned connection (`current transaction is aborted`, `read-only
    transaction`).

It prints one `CHAOS {json}` line of figures and exits 1 when a check fails.

    python3 scripts/chaos.py --duration 300            # the long run (5 minutes)
    python3 scripts/chaos.py --duration 75 --every 2.5 # CI's short run

The replicas are `target/release/agentry` when it exists, else `target/debug/agentry`
(`--binary` names another). PostgreSQL: `$AGENTRY_TEST_POSTGRES_URL`
(postgres://postgres@127.0.0.1:5432/postgres by default).
"""

import argparse
import collections
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POISONED = ("current transaction is aborted", "read-only transaction")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(url, sql):
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", sql], check=True,
                   stdout=subprocess.DEVNULL)


class Replica:
    """One `agentry` process on a fixed port; restarted on the same port and node id."""

    def __init__(self, index, binary, database_url, lease_ttl, logdir):
        self.index = index
        self.port = free_port()
        self.binary = binary
        self.database_url = database_url
        self.lease_ttl = lease_ttl
        self.log_path = os.path.join(logdir, f"replica-{index}.log")
        self.proc = None
        self.busy = False  # a chaos event holds it

    def start(self):
        env = dict(os.environ)
        env.update({
            "DATABASE_URL": self.database_url,
            "AGENTRY_BIND": f"127.0.0.1:{self.port}",
            "AGENTRY_NODE_ID": f"chaos-{self.index}",
            "AGENTRY_LEASE_TTL": self.lease_ttl,
            "AGENTRY_SHUTDOWN_GRACE": "3s",
            "RUST_LOG": "info",
        })
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.binary], env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"replica {self.index} exited at start; see {self.log_path}")
            try:
                status, _ = call(self, "GET", "/healthz", timeout=1)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"replica {self.index} did not answer; see {self.log_path}")

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait_exit(self, limit):
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            self.wait_exit(20)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


class Answers:
    """Every HTTP answer the client got, by status, and the 5xx ones other than 503."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_status = collections.Counter()
        self.server_errors = []
        self.abandoned = 0
        self.failed_connections = 0

    def record(self, status, method, path, body):
        with self.lock:
            self.by_status[status] += 1
            if status >= 500 and status != 503:
                self.server_errors.append((status, method, path, body))


ANSWERS = Answers()


def call(replica, method, path, body=None, timeout=10.0):
    """One request: (status, parsed JSON or None). Raises OSError (timeouts included) when
    the replica does not answer in time."""
    conn = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        ANSWERS.record(resp.status, method, path, parsed)
        return resp.status, parsed
    finally:
        conn.close()


class Ledger:
    """What the client was told."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acknowledged = {}  # id -> workflow
        self.started = {}  # id -> workflow (maybe started: an abandoned stream)
        self.resumes = collections.defaultdict(list)  # expense id -> [(managerId, status)]
        self.unfinished = []  # scenarios the client gave up on

    def ack(self, id_, workflow):
        with self.lock:
            self.acknowledged[id_] = workflow

    def maybe(self, id_, workflow):
        with self.lock:
            self.started[id_] = workflow

    def resumed(self, id_, manager, status):
        with self.lock:
            self.resumes[id_].append((manager, status))

    def gave_up(self, what):
        with self.lock:
            self.unfinished.append(what)


LEDGER = Ledger()


class Load:
    """The client load: workers running scenarios until told to stop."""

    def __init__(self, replicas, workers, seed):
        self.replicas = replicas
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.work, args=(seed + i,), daemon=True)
                        for i in range(workers)]
        self.counts = collections.Counter()

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self, limit):
        self.stopping.set()
        deadline = time.time() + limit
        for t in self.threads:
            t.join(max(0.1, deadline - time.time()))
        return [t for t in self.threads if t.is_alive()]

    def work(self, seed):
        rng = random.Random(seed)
        scenarios = [(self.countdown, 30), (self.expense, 30), (self.cancel, 10),
                     (self.abandoned_reads, 20), (self.abandoned_stream, 10)]
        while not self.stopping.is_set():
            scenario = rng.choices([s for s, _ in scenarios], [w for _, w in scenarios])[0]
            self.counts[scenario.__name__] += 1
            scenario(rng)

    def patiently(self, rng, method, path, body, done, limit=180, timeout=None):
        """Sends the request to replicas in turn until `done(status, body)` says it is
        answered (retrying time-outs, refused connections and 503s, as a careful client does);
        returns that answer, or None when `limit` seconds passed."""
        deadline = time.time() + limit
        while time.time() < deadline:
            replica = rng.choice(self.replicas)
            try:
                status, answer = call(replica, method, path, body,
                                      timeout=timeout or rng.uniform(0.3, 6.0))
            except OSError:
                ANSWERS.failed_connections += 1
                time.sleep(0.1)
                continue
            if done(status, answer):
                return status, answer
            time.sleep(0.1 if status == 503 else 0.2)
        return None

    def countdown(self, rng):
        id_ = f"cd-{uuid.uuid4().hex[:12]}"
        body = {"input": {"stepDelayMs": rng.randint(10, 200)}, "options": {"executionId": id_}}
        answer = self.patiently(rng, "POST", "/workflows/countdown/execute", body,
                                lambda s, b: s == 200)
        if answer is None:
            LEDGER.gave_up(f"countdown {id_}")
            return
        LEDGER.ack(id_, "countdown")

    def expense(self, rng):
        id_ = f"ea-{uuid.uuid4().hex[:12]}"
        body = {"input": {"employeeId": "e-1", "amount": 1500, "category": "travel"},
                "options": {"executionId": id_}}
        answer = self.patiently(rng, "POST", "/workflows/expense-approval/execute", body,
                                lambda s, b: s == 200)
        if answer is None:
            LEDGER.gave_up(f"expense {id_}")
            return
        LEDGER.ack(id_, "expense-approval")
        path = f"/workflows/expense-approval/executions/{id_}/resume"
        for round_ in range(5):
            # Two or three managers answer at once, through different replicas.
            managers = [f"m-{round_}-{k}" for k in range(rng.randint(2, 3))]
            threads = [threading.Thread(target=self.resume, args=(
                random.Random(rng.random()), path, id_, m)) for m in managers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            state = self.settled_state(rng, "expense-approval", id_)
            if state is None or state.get("status") != "suspended":
                return
            # Suspended still (every resume refused, or a resume lost): a client answers again.
        LEDGER.gave_up(f"expense {id_}: still suspended after five rounds of resumes")

    def resume(self, rng, path, id_, manager):
        body = {"resumeData": {"approved": True, "managerId": manager}}
        answer = self.patiently(rng, "POST", path, body, lambda s, b: s in (200, 400, 404))
        LEDGER.resumed(id_, manager, None if answer is None else answer[0])

    def settled_state(self, rng, workflow, id_):
        """The execution's state once it is not running (None after a minute)."""
        path = f"/workflows/{workflow}/executions/{id_}/state"
        deadline = time.time() + 60
        while time.time() < deadline:
            answer = self.patiently(rng, "GET", path, None, lambda s, b: s in (200, 404), 60)
            if answer and answer[0] == 200 and answer[1]["data"]["status"] not in (
                    "running", "queued"):
                return answer[1]["data"]
            time.sleep(0.2)
        return None

    def cancel(self, rng):
        id_ = f"cc-{uuid.uuid4().hex[:12]}"
        body = {"input": {"stepDelayMs": 400}, "options": {"executionId": id_}}
        # The execute is abandoned at once; the execution runs on.
        try:
            call(rng.choice(self.replicas), "POST", "/workflows/countdown/execute", body,
                 timeout=0.3)
        except OSError:
            ANSWERS.abandoned += 1
        LEDGER.maybe(id_, "countdown")
        time.sleep(rng.uniform(0, 1.5))
        path = f"/workflows/countdown/executions/{id_}/cancel"
        self.patiently(rng, "POST", path, {}, lambda s, b: s in (200, 400, 404), 60)

    def abandoned_reads(self, rng):
        with LEDGER.lock:
            known = list(LEDGER.acknowledged.items())
        paths = ["/executions?limit=50", "/workflows/countdown/executions?limit=20"]
        if known:
            id_, workflow = rng.choice(known)
            paths += [f"/workflows/{workflow}/executions/{id_}/state", f"/executions/{id_}"]
        for _ in range(rng.randint(3, 10)):
            try:
                call(rng.choice(self.replicas), "GET", rng.choice(paths),
                     timeout=rng.uniform(0.001, 0.03))
            except OSError:
                ANSWERS.abandoned += 1

    def abandoned_stream(self, rng):
        id_ = f"st-{uuid.uuid4().hex[:12]}"
        body = json.dumps({"input": {"stepDelayMs": rng.randint(50, 300)},
                           "options": {"executionId": id_}}).encode()
        replica = rng.choice(self.replicas)
        LEDGER.maybe(id_, "countdown")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=3)
            conn.request("POST", "/workflows/countdown/stream", body=body,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            ANSWERS.record(resp.status, "POST", "/workflows/countdown/stream", None)
            resp.fp.readline()  # the first line of the first event, then hang up
            conn.close()
        except OSError:
            ANSWERS.abandoned += 1


class Chaos:
    """kill -9, SIGSTOP/SIGCONT and SIGTERM, never to every replica at once."""

    def __init__(self, replicas, every, seed):
        self.replicas = replicas
        self.every = every
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.events = collections.Counter()
        self.stopping = threading.Event()
        self.handlers = []

    def run(self):
        while not self.stopping.wait(self.rng.uniform(0.5, 1.5) * self.every):
            with self.lock:
                free = [r for r in self.replicas if not r.busy]
                if len(free) < 2:  # at least one replica stays up and running
                    continue
                victim = self.rng.choice(free)
                victim.busy = True
            kind = self.rng.choices(["kill", "stop", "term"], [35, 35, 30])[0]
            self.events[kind] += 1
            t = threading.Thread(target=self.strike, args=(victim, kind,
                                                           random.Random(self.rng.random())))
            t.start()
            self.handlers.append(t)

    def strike(self, replica, kind, rng):
        try:
            if kind == "kill":
                replica.signal(signal.SIGKILL)
                replica.wait_exit(10)
                time.sleep(rng.uniform(0.2, 2.0))
                replica.start()
            elif kind == "stop":
                replica.signal(signal.SIGSTOP)
                time.sleep(rng.uniform(0.5, 6.0))  # past the lease, sometimes
                replica.signal(signal.SIGCONT)
            else:
                replica.signal(signal.SIGTERM)
                replica.wait_exit(30)
                time.sleep(rng.uniform(0.2, 1.0))
                replica.start()
        finally:
            with self.lock:
                replica.busy = False

    def finish(self):
        self.stopping.set()
        for t in self.handlers:
            t.join()


def all_executions(replica):
    """Every execution, through the paged list."""
    out, cursor = [], None
    while True:
        path = "/executions?limit=100" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
        status, body = call(replica, "GET", path, timeout=30)
        assert status == 200, (status, body)
        data = body["data"]
        out += data["executions"]
        cursor = data.get("nextCursor")
        if not cursor:
            return out


def event_log(replica, workflow, id_):
    """An execution's stored events, read from its stream until its final result (the stream
    of an execution that ended closes after it)."""
    conn = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=30)
    conn.request("GET", f"/workflows/{workflow}/executions/{id_}/stream")
    resp = conn.getresponse()
    events = []
    try:
        for line in resp:
            if line.startswith(b"data:"):
                ev = json.loads(line[5:])
                events.append(ev)
                if ev.get("type") == "workflow-result":
                    break
    finally:
        conn.close()
    return events


def verify(replica, replicas):
    failures = []
    executions = all_executions(replica)
    by_id = {e["executionId"]: e for e in executions}
    statuses = collections.Counter(e["status"] for e in executions)

    lost = [i for i in LEDGER.acknowledged if i not in by_id]
    if lost:
        failures.append(f"lost: {len(lost)} acknowledged executions are gone: {lost[:5]}")
    stuck = [e["executionId"] for e in executions if e["status"] in ("running", "queued")]
    stuck += [e["executionId"] for e in executions
              if e["workflowId"] == "expense-approval" and e["status"] == "suspended"]
    if stuck:
        failures.append(f"stuck: {len(stuck)} executions: {stuck[:5]}")
    errored = [e["executionId"] for e in executions if e["status"] == "error"]
    if errored:
        failures.append(f"error: {len(errored)} executions ended in error: {errored[:5]}")

    doubled, resuspended = [], []
    for e in executions:
        if e["status"] not in ("completed", "cancelled", "error"):
            continue
        log = event_log(replica, e["workflowId"], e["executionId"])
        completes = collections.Counter(ev.get("from") for ev in log
                                        if ev.get("type") == "step-complete")
        twice = [s for s, n in completes.items() if n > 1]
        if twice:
            doubled.append((e["executionId"], twice))
        suspensions = sum(1 for ev in log if ev.get("type") == "workflow-suspended")
        if e["workflowId"] == "expense-approval" and suspensions > 1:
            resuspended.append(e["executionId"])
    if doubled:
        failures.append(f"doubled: {len(doubled)} executions committed a step twice: {doubled[:5]}")
    if resuspended:
        failures.append(f"resume lost: {len(resuspended)} expenses suspended again after a "
                        f"resume: {resuspended[:5]}")

    winners_wrong = []
    for id_, answers in LEDGER.resumes.items():
        won = [m for m, s in answers if s == 200]
        e = by_id.get(id_)
        approved_by = None
        if e and e["status"] == "completed":
            _, body = call(replica, "GET", f"/executions/{id_}", timeout=30)
            approved_by = (body["data"].get("result") or {}).get("approvedBy")
        sent = {m for m, _ in answers}
        if len(won) > 1 or (won and approved_by != won[0]) or (
                approved_by is not None and approved_by not in sent):
            winners_wrong.append((id_, answers, approved_by))
    if winners_wrong:
        failures.append(f"resume winners: {len(winners_wrong)}: {winners_wrong[:3]}")

    if ANSWERS.server_errors:
        failures.append(f"5xx: {len(ANSWERS.server_errors)} answers other than 503: "
                        f"{ANSWERS.server_errors[:3]}")
    poisoned = {r.index: sum(r.log().count(p) for p in POISONED) for r in replicas}
    if any(poisoned.values()):
        failures.append(f"poisoned connections logged: {poisoned}")
    if LEDGER.unfinished:
        failures.append(f"the client gave up: {LEDGER.unfinished[:5]}")
    return failures, statuses, len(executions)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=300, help="seconds of chaos")
    p.add_argument("--every", type=float, default=3.5, help="mean seconds between chaos events")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--workers", type=int, default=8, help="client threads")
    p.add_argument("--lease-ttl", default="3s")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--binary")
    p.add_argument("--postgres-url", default=os.environ.get(
        "AGENTRY_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--logs", help="keep the replicas' logs in this folder")
    args = p.parse_args()
    binary = args.binary or next(
        (b for b in (os.path.join(ROOT, "target", k, "agentry") for k in ("release", "debug"))
         if os.path.exists(b)), None)
    if not binary:
        raise SystemExit("no agentry binary: cargo build -p agentry-server (or --binary)")
    logdir = args.logs or tempfile.mkdtemp(prefix="agentry-chaos-")
    os.makedirs(logdir, exist_ok=True)

    name = f"agentry_chaos_{uuid.uuid4().hex[:10]}"
    psql(args.postgres_url, f"CREATE DATABASE {name}")
    base = urllib.parse.urlsplit(args.postgres_url)
    database_url = urllib.parse.urlunsplit(base._replace(path="/" + name))
    replicas = [Replica(i, binary, database_url, args.lease_ttl, logdir)
                for i in range(args.replicas)]
    print(f"chaos: seed {args.seed}, {args.replicas} replicas of {binary} on {name}, "
          f"logs in {logdir}", flush=True)
    try:
        for r in replicas:
            r.start()
        load = Load(replicas, args.workers, args.seed)
        chaos = Chaos(replicas, args.every, args.seed)
        began = time.time()
        load.start()
        chaos_thread = threading.Thread(target=chaos.run)
        chaos_thread.start()
        time.sleep(args.duration)
        chaos.stopping.set()
        chaos_thread.join()
        chaos.finish()
        for r in replicas:
            if not r.alive():
                r.start()
            r.signal(signal.SIGCONT)
        print(f"chaos: {sum(chaos.events.values())} events {dict(chaos.events)}; "
              "waiting for the client to finish", flush=True)
        left = load.finish(240)
        if left:
            LEDGER.gave_up(f"{len(left)} client threads still busy after 240 s")
        # Quiescence: nothing running or queued (leases of the killed expire meanwhile).
        deadline = time.time() + 120
        while time.time() < deadline:
            busy = [e for e in all_executions(replicas[0])
                    if e["status"] in ("running", "queued")]
            if not busy:
                break
            time.sleep(1)
        failures, statuses, total = verify(replicas[0], replicas)
        report = {
            "seed": args.seed,
            "seconds": round(time.time() - began),
            "chaos_events": dict(chaos.events),
            "executions": total,
            "statuses": dict(statuses),
            "acknowledged": len(LEDGER.acknowledged),
            "scenarios": dict(load.counts),
            "answers": {str(k): v for k, v in sorted(ANSWERS.by_status.items())},
            "abandoned_requests": ANSWERS.abandoned,
            "refused_connections": ANSWERS.failed_connections,
            "resumes": sum(len(v) for v in LEDGER.resumes.values()),
            "failures": failures,
        }
        print("CHAOS " + json.dumps(report), flush=True)
        for f in failures:
            print(f"FAILED: {f}", file=sys.stderr)
        return 1 if failures else 0
    finally:
        for r in replicas:
            r.stop()
        psql(args.postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    sys.exit(main())
