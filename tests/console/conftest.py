"""Fixtures of the console's browser tests: the servers, Chromium, and a watch on every page.

The Rust harness starts two servers and runs `python -m pytest tests/console` with:

- `AGENTRY_CONSOLE_BASE`: a server without authentication (`http://127.0.0.1:PORT`);
- `AGENTRY_CONSOLE_JWT_BASE`, `AGENTRY_CONSOLE_VALID_TOKEN`, `AGENTRY_CONSOLE_EXPIRED_TOKEN`:
  a server with the JWT provider on, and a valid and an expired token of it;
- `AGENTRY_CONSOLE_STRICT_BASE`, `AGENTRY_CONSOLE_ADMIN_TOKEN`: a server in strict mode (same
  secret), and a token with the `admin` role;
- `AGENTRY_CONSOLE_SCREENSHOTS` (optional): a directory for the README's screenshots;
- `CHROMIUM` (optional): the browser, default Debian's `/usr/bin/chromium` (Playwright's own
  browser download cannot work here).

Every page a test opens is watched: a console error, an uncaught exception, a failed request or
an answer >= 400 fails the test, unless the test declared that answer as one it provokes
(`watch.expect(status, url_part)`).
"""

import os
import pathlib

import pytest
from playwright.sync_api import expect, sync_playwright
from support import Api

# Waits are Playwright's auto-waiting assertions: generous, for a loaded CI machine.
expect.set_options(timeout=15_000)


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: the console tests run against real servers "
            "(the Rust harness sets it; see tests/console/conftest.py)"
        )
    return value.rstrip("/")


@pytest.fixture(scope="session")
def base() -> str:
    return env("AGENTRY_CONSOLE_BASE")


@pytest.fixture(scope="session")
def jwt_base() -> str:
    return env("AGENTRY_CONSOLE_JWT_BASE")


@pytest.fixture(scope="session")
def strict_base() -> str:
    return env("AGENTRY_CONSOLE_STRICT_BASE")


@pytest.fixture(scope="session")
def admin_token() -> str:
    return env("AGENTRY_CONSOLE_ADMIN_TOKEN")


@pytest.fixture(scope="session")
def valid_token() -> str:
    return env("AGENTRY_CONSOLE_VALID_TOKEN")


@pytest.fixture(scope="session")
def expired_token() -> str:
    return env("AGENTRY_CONSOLE_EXPIRED_TOKEN")


# ---- The API, from Python (setup and checks) ------------------------------------------------------


@pytest.fixture(scope="session")
def api(base) -> Api:
    return Api(base)


@pytest.fixture(scope="session")
def jwt_api(jwt_base, valid_token) -> Api:
    return Api(jwt_base, valid_token)


# ---- The browser -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser():
    executable = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not pathlib.Path(executable).exists():
        pytest.fail(f"{executable} is missing: run scripts/install-test-deps.sh (the README's set-up) first")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, headless=True)
        yield b
        b.close()


class Watch:
    """What went wrong on a page: console errors, page errors, failed requests, answers >= 400."""

    def __init__(self, page):
        self.problems: list[str] = []
        self.expected: list[tuple[int, str]] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"uncaught exception: {e}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def expect(self, status: int, url_part: str) -> None:
        """Declares an answer the test provokes on purpose (and the browser's console line
        that reports it)."""
        self.expected.append((status, url_part))

    def _is_expected(self, status: int, url: str) -> bool:
        return any(status == s and part in url for s, part in self.expected)

    def _console(self, msg):
        if msg.type != "error":
            return
        url = (msg.location or {}).get("url", "")
        # Chromium reports every answer >= 400 in the console too; those are judged as answers.
        if msg.text.startswith("Failed to load resource: the server responded with a status of"):
            status = int(msg.text.split("status of ")[1].split()[0])
            if self._is_expected(status, url):
                return
        self.problems.append(f"console error: {msg.text} ({url})")

    def _failed(self, request):
        failure = request.failure or ""
        # A request the page itself gave up (a stream closed as its view goes away, a poll in
        # flight when the test moves to another page): a cancellation, not a failure.
        if failure == "net::ERR_ABORTED":
            return
        self.problems.append(f"request failed: {request.method} {request.url}: {failure}")

    def _response(self, response):
        if response.status >= 400 and not self._is_expected(response.status, response.url):
            self.problems.append(f"answer {response.status}: {response.request.method} {response.url}")

    def check(self):
        assert not self.problems, "problems on the page:\n" + "\n".join(self.problems)


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    """A page whose problems fail the test (checked when the test has passed)."""
    p = context.new_page()
    watch = Watch(p)
    p.watch = watch
    yield p
    watch.check()


@pytest.fixture(scope="session")
def screenshots():
    """Saves a screenshot as <name> under $AGENTRY_CONSOLE_SCREENSHOTS, when it is set."""
    directory = os.environ.get("AGENTRY_CONSOLE_SCREENSHOTS")

    def save(page, name: str, **options):
        if directory:
            pathlib.Path(directory).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(pathlib.Path(directory) / name), **options)

    return save
