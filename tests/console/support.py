"""Helpers of the console tests: the agentry HTTP API from Python (stdlib only), for setting up
executions and checking what the console did, and ids no other test uses."""

import json
import threading
import urllib.error
import urllib.request
import uuid


class Api:
    """The agentry HTTP API of one server, optionally with a Bearer token."""

    def __init__(self, base: str, token: str | None = None):
        self.base = base
        self.token = token

    def _request(self, method: str, path: str, body=None) -> urllib.request.Request:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return urllib.request.Request(self.base + path, data=data, method=method, headers=headers)

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        """The status and the envelope of one call."""
        try:
            with urllib.request.urlopen(self._request(method, path, body), timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def data(self, method: str, path: str, body=None):
        """The `data` of a call that must succeed."""
        status, envelope = self.call(method, path, body)
        assert status < 300 and envelope.get("success"), f"{method} {path}: {status} {envelope}"
        return envelope["data"]

    def execute(self, workflow: str, input: dict, execution_id: str) -> dict:
        """Runs a workflow to its end or its suspension (POST .../execute)."""
        return self.data(
            "POST", f"/workflows/{workflow}/execute", {"input": input, "options": {"executionId": execution_id}}
        )

    def start(self, workflow: str, input: dict, execution_id: str) -> None:
        """Starts a workflow and returns once it exists, leaving it running: reads its event
        stream (POST .../stream) up to the first event, then lets the connection go (a durable
        run does not depend on its client)."""
        req = self._request(
            "POST", f"/workflows/{workflow}/stream", {"input": input, "options": {"executionId": execution_id}}
        )
        response = urllib.request.urlopen(req, timeout=60)
        assert response.status == 200, response.status
        for line in response:
            if line.startswith(b"data:"):
                break

        # Drain the rest in the background, so that the server is never stuck on a full socket.
        def drain():
            try:
                for _ in response:
                    pass
            except Exception:
                pass
            finally:
                response.close()

        threading.Thread(target=drain, daemon=True).start()

    def state(self, execution_id: str) -> dict:
        return self.data("GET", f"/executions/{execution_id}")


def new_id(prefix: str) -> str:
    """An execution id no other test (or run) uses."""
    return f"console-{prefix}-{uuid.uuid4().hex[:10]}"
