"""Instructions per request of one case, by callgrind: the CPU side of comparing two builds
(docs/PERFORMANCE.md), which the wall clock of a shared machine cannot resolve.

    python3 scripts/callgrind-per-request.py BINARY CASE N [--port PORT]

Runs BINARY (`agentry serve` on a fresh SQLite file) under `valgrind --tool=callgrind` twice:
once with no request, once with N requests of CASE sent one after another; prints one JSON line
with both totals and (full - base) / N. CASE is one of: order (order-fulfillment execute),
durable (assistant /text, durable, one tool call), wordcount (word-count execute),
wordcount-dsl (the same workflow written as a definition: crates/agentry-bench/definitions,
which the server is given with --definitions), agents (GET /agents). Two builds can be measured
at once on different ports: instruction counts do not depend on the machine's load. With
--keep FILE, the N-request run's callgrind output is kept there (for callgrind_annotate)."""
import json, os, re, shutil, signal, subprocess, sys, tempfile, time, http.client
import argparse
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("binary")
ap.add_argument("case")
ap.add_argument("n", type=int)
ap.add_argument("--port", type=int, default=39500)
ap.add_argument("--keep", metavar="FILE", help="keep the N-request run's callgrind output here")
args = ap.parse_args()
DEFINITIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "crates", "agentry-bench", "definitions")
bin_path, case, n = args.binary, args.case, args.n
CASES = {
    "order": ("POST", "/workflows/order-fulfillment/execute", {"input": {"orderId": "o1", "items": [{"sku": "A", "quantity": 2, "unitPrice": 10}, {"sku": "B", "quantity": 1, "unitPrice": 5.5}], "express": True}}),
    "durable": ("POST", "/agents/assistant/text", {"input": "What is the weather in Paris?", "options": {"durable": True}}),
    "wordcount": ("POST", "/workflows/word-count/execute", {"input": {"text": "a b c"}}),
    "wordcount-dsl": ("POST", "/workflows/word-count-dsl/execute", {"input": {"text": "a b c"}}),
    "agents": ("GET", "/agents", None),
}
def run(count):
    d = tempfile.mkdtemp()
    out = os.path.join(d, "cg.out")
    port = args.port + (1 if count else 0)
    env = dict(os.environ, RUST_LOG="warn")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", bin_path, "serve",
                          "--bind", f"127.0.0.1:{port}", "--database-url", f"sqlite://{d}/db.sqlite",
                          "--definitions", DEFINITIONS],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/healthz"); c.getresponse().read(); break
        except Exception:
            time.sleep(0.5)
    method, path, body = CASES[case]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(count):
        b = None if body is None else json.dumps(body)
        c.request(method, path, body=b, headers={"Content-Type": "application/json"} if b else {})
        r = c.getresponse(); data = r.read()
        if r.status >= 300:
            print("bad answer", r.status, data[:200]); break
    p.send_signal(signal.SIGINT); p.wait(timeout=300)
    text = open(out).read()
    if count and args.keep:
        shutil.copyfile(out, args.keep)
    m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    return int(m.group(1))
base = run(0)
full = run(n)
print(json.dumps({"bin": bin_path, "case": case, "n": n, "base": base, "full": full, "per_request": (full - base) / n}))
