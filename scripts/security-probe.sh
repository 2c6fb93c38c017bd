#!/usr/bin/env bash
# Replays the hardening issue's attacks against a running agentry (B=base URL, default
# http://127.0.0.1:3998) and prints each answer's status and time, and the server's RSS before and
# after. Usage: scripts/security-probe.sh PID
B=${B:-http://127.0.0.1:3998}
PID=$1
rss() { awk '/VmRSS/{print $2" kB"}' /proc/$PID/status; }
echo "RSS idle: $(rss)"
python3 - "$B" <<'PY'
import json, sys, time, urllib.request
B = sys.argv[1]
def post(path, body, ctype="application/json"):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    req = urllib.request.Request(B + path, data=data, headers={"content-type": ctype}, method="POST")
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            out = r.status, r.read()
    except urllib.error.HTTPError as e:
        out = e.code, e.read()
    return out[0], (time.perf_counter() - t) * 1000, out[1][:110]
calc = [{"role": "user", "parts": [{"type": "text", "text": "calculate " + "-" * 20000}]}]
print("chat 20,000 '-'          ", post("/agents/assistant/chat", {"input": calc}))
print("text depth 450 '('       ", post("/agents/assistant/text", {"input": "calculate " + "(" * 450 + "1" + ")" * 450})[:2])
bomb = {"type": "object", "properties": {"xs": {"type": "array", "minItems": 1000000, "items": {"type": "string"}}}, "required": ["xs"]}
print("object minItems 1e6      ", post("/agents/writer/object", {"input": "x", "schema": bomb}))
s = {"type": "object", "properties": {"s": {"type": "string", "minLength": 600000}}, "required": ["s"]}
print("object minLength 600000  ", post("/agents/writer/object", {"input": "x", "schema": s}))
big = {"type": "object", "properties": {"xs": {"type": "array", "minItems": 1000, "items": {"type": "string", "minLength": 1000}}}, "required": ["xs"]}
st, ms, _ = post("/agents/writer/stream-object", {"input": "x", "schema": big})
print("stream-object 1000x1000 (largest allowed)", st, round(ms, 1))
print("suspend text/plain       ", post("/workflows/countdown/executions/x/suspend", b'{"reason":"x"}', "text/plain"))
t = time.perf_counter()
for i in range(30):
    post("/agents/writer/object", {"input": "x", "schema": bomb})
print("30 schema bombs in ms    ", round((time.perf_counter() - t) * 1000, 1))
for i in range(200):
    post("/agents/writer/object?x=" + "y" * 100, {"input": 7, "schema": {"type": "object", "properties": {("k%d" % j): {"type": "nope"} for j in range(2000)}}})
with urllib.request.urlopen(B + "/api/logs?limit=1000") as r:
    print("/api/logs bytes after 200 large-log requests", len(r.read()))
PY
echo "RSS after: $(rss)"
