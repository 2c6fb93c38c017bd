"""Queues in the console (Chromium, driven by Playwright) against a real server: the Queues page
with the example `enrich-customer` and its limits; executions queued behind a slow one of the
same customer (the queue's key limit is 1) on the queue's page, in the executions list filtered
by `queued` and on their own pages, where Cancel ends one that never started; an unknown queue
and strict mode.

Each test uses a customer id of its own (`new_id`), so that its executions share a key with no
other test's, and ends the slow execution it started.
"""

import re
import time

from playwright.sync_api import expect
from support import Api, new_id
from test_console import execution_status

QUEUE = "enrich-customer"


def queue_row(page, name=QUEUE):
    return page.get_by_role("table", name="Queues").locator(f'tr[data-queue="{name}"]')


def wait_for_status(api, execution_id, status, seconds=15):
    deadline = time.monotonic() + seconds
    while (now := api.state(execution_id)["status"]) != status:
        assert time.monotonic() < deadline, f"{execution_id} is {now}, not {status}"
        time.sleep(0.1)


def queue_behind_a_slow_one(api, works):
    """A slow `enrich-customer` of a new customer (10 s, the most its input allows), running,
    and more of the same customer queued behind it, one per item of `works` (their `work`, in
    ms), in that order: `(customer, slow id, [queued ids])`."""
    customer = new_id("customer")
    slow = new_id("enrich-slow")
    api.start(QUEUE, {"customerId": customer, "work": 10_000}, slow)
    wait_for_status(api, slow, "running")
    queued = [new_id("enrich-queued") for _ in works]
    for execution_id, work in zip(queued, works):
        api.start(QUEUE, {"customerId": customer, "work": work}, execution_id)
    for execution_id in queued:
        assert api.state(execution_id)["status"] == "queued", api.state(execution_id)
    return customer, slow, queued


def test_the_queues_page_lists_enrich_customer_with_its_limits(page, base, screenshots):
    page.goto(f"{base}/console/queues")
    nav = page.get_by_role("navigation", name="Console")
    expect(nav.get_by_role("link", name="Queues", exact=True)).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("heading", name="Queues", level=1)).to_be_visible()
    row = queue_row(page)
    expect(row.get_by_role("link", name=QUEUE).first).to_be_visible()
    limits = row.locator("ul.limits")
    expect(limits).to_contain_text("Concurrency 4")
    expect(limits).to_contain_text("Key /customerId · 1 per key")
    expect(limits).to_contain_text("Rate 50 per 1.0 s")
    screenshots(page, "console-queues.png", full_page=True)

    # Its name opens the queue's page, with the same limits.
    row.get_by_role("link", name=QUEUE, exact=True).first.click()
    expect(page).to_have_url(re.compile(rf"/console/queues/{QUEUE}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Queue {QUEUE}")
    expect(page.locator("dl.facts")).to_contain_text("/customerId · 1 per key")
    expect(page.get_by_role("link", name=f"Queued executions of {QUEUE}")).to_have_attribute(
        "href", f"/console/executions?workflow={QUEUE}&status=queued"
    )


def test_executions_queued_behind_a_slow_one_show_everywhere_and_cancel(page, api, base, screenshots):
    # Behind the slow one (10 s), another slow one, then two quick ones: those two wait 20 s.
    customer, slow, queued = queue_behind_a_slow_one(api, [10_000, 50, 50])
    second, started, cancelled = queued

    # The list: its queued count links to the queued executions.
    page.goto(f"{base}/console/queues")
    row = queue_row(page)
    expect(row.get_by_role("link", name=re.compile(rf"^{QUEUE}: \d+ queued$"))).not_to_have_text("0")

    # The queue's page: the customer's key holds one running and three queued.
    row.get_by_role("link", name=QUEUE, exact=True).first.click()
    key = page.get_by_role("table", name="Keys").locator(f'tr[data-key="{customer}"]')
    expect(key.locator("td")).to_have_text([customer, "3", "1", "0", re.compile(r"\S")])
    expect(page.get_by_test_id("queue-queued")).not_to_have_text("0")
    expect(page.get_by_test_id("queue-oldest-wait")).not_to_have_text("—")
    screenshots(page, "console-queue.png", full_page=True)

    # The executions list filtered by `queued`: the quick ones, with the queued badge.
    page.get_by_role("link", name=f"Queued executions of {QUEUE}").click()
    expect(page).to_have_url(re.compile(rf"/console/executions\?workflow={QUEUE}&status=queued$"))
    expect(page.get_by_label("Status")).to_have_value("queued")
    for execution_id in [started, cancelled]:
        r = page.get_by_role("row").filter(has=page.get_by_role("link", name=execution_id, exact=True))
        expect(r.locator(".status")).to_have_text("queued")
        expect(r.locator(".status")).to_have_class(re.compile(r"\bstatus-queued\b"))
    expect(page.get_by_role("link", name=slow, exact=True)).to_have_count(0)

    # A queued execution's page: its queue, key, priority and wait, its queued event, and Cancel.
    page.goto(f"{base}/console/executions/{cancelled}")
    expect(execution_status(page)).to_have_text("queued")
    region = page.get_by_role("region", name="Queue", exact=True)
    expect(region.get_by_role("link", name=QUEUE, exact=True)).to_have_attribute("href", f"/console/queues/{QUEUE}")
    expect(region.locator("dt")).to_have_text(["Queue", "Key", "Priority", "Queued", "Waiting"])
    expect(region.locator("dd")).to_have_text([QUEUE, customer, "0", re.compile(r"\S"), re.compile(r"^for \d")])
    expect(page.get_by_role("region", name="Queued", exact=True)).to_contain_text(
        f"Waits in queue {QUEUE} with key {customer} since"
    )
    events = page.get_by_role("list", name="Events")
    expect(events.locator('li[data-type="workflow-queued"]')).to_have_count(1)
    expect(events.locator('li[data-type="workflow-queued"]')).to_contain_text(f"queue {QUEUE} · key {customer}")
    # The log is followed live while it waits (its start would come next).
    expect(page.get_by_text("Following live…")).to_be_visible()
    screenshots(page, "console-execution-queued.png", full_page=True)
    page.get_by_role("button", name="Cancel execution").click()
    expect(execution_status(page)).to_have_text("cancelled")
    expect(page.get_by_role("region", name="Cancellation")).to_contain_text("Cancelled from the console")
    expect(region.locator("dd").last).to_have_text("never")
    expect(page.get_by_role("button", name="Cancel execution")).to_have_count(0)
    assert api.state(cancelled)["status"] == "cancelled"

    # The slow ones end: the quick one left starts, and its page shows how long it waited.
    for execution_id in [slow, second]:
        api.data("POST", f"/workflows/{QUEUE}/executions/{execution_id}/cancel", {"reason": "test over"})
    wait_for_status(api, started, "completed")
    page.goto(f"{base}/console/executions/{started}")
    expect(execution_status(page)).to_have_text("completed")
    expect(page.get_by_test_id("queue-started")).to_contain_text("after waiting")
    expect(page.get_by_role("list", name="Events").locator('li[data-type="workflow-start"]')).to_have_count(1)
    # The cancelled one never started.
    assert "startedAt" not in (api.state(cancelled).get("queue") or {})


def test_the_overview_counts_queued_executions(page, api, base):
    _, slow, _ = queue_behind_a_slow_one(api, [50])
    page.goto(f"{base}/console")
    workflows = page.get_by_role("table", name="Workflows")
    expect(workflows.get_by_role("columnheader", name="queued", exact=True)).to_be_visible()
    count = workflows.get_by_role("link", name=f"{QUEUE}: queued")
    expect(count).not_to_have_text("0")
    count.click()
    expect(page).to_have_url(re.compile(rf"/console/executions\?workflow={QUEUE}&status=queued$"))
    api.data("POST", f"/workflows/{QUEUE}/executions/{slow}/cancel", {})


def test_an_unknown_queue_says_so(page, base):
    page.watch.expect(404, "/queues/no-such-queue")
    page.goto(f"{base}/console/queues/no-such-queue")
    expect(page.get_by_role("heading", name="Could not load this view", level=1)).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("no-such-queue")
    expect(page.get_by_role("link", name="Try again")).to_be_visible()


def test_in_strict_mode_an_admin_sees_the_queues(page, strict_base, admin_token):
    customer, slow, _ = queue_behind_a_slow_one(Api(strict_base, admin_token), [50])
    page.goto(f"{strict_base}/console/queues")
    page.get_by_label("Access token").fill(admin_token)
    page.get_by_role("button", name="Sign in").click()
    row = queue_row(page)
    expect(row.get_by_role("link", name=re.compile(rf"^{QUEUE}: \d+ queued$"))).not_to_have_text("0")
    row.get_by_role("link", name=QUEUE, exact=True).first.click()
    key = page.get_by_role("table", name="Keys").locator(f'tr[data-key="{customer}"]')
    expect(key.locator("td").nth(1)).to_have_text("1")
    Api(strict_base, admin_token).data("POST", f"/workflows/{QUEUE}/executions/{slow}/cancel", {})


def test_the_queue_pages_fit_a_phone(page, base):
    page.set_viewport_size({"width": 360, "height": 740})
    for path, heading in {"/console/queues": "Queues", f"/console/queues/{QUEUE}": f"Queue {QUEUE}"}.items():
        page.goto(base + path)
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow} px wider than a 360 px screen"
