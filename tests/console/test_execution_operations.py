"""The workflow operations on the console's execution page, in a real browser against a real
server: retry a failed execution, fork one from a step with a new input, and send an event to
one that waits for it (its mailbox then lists it). Fixtures: conftest.py; conventions: as in
test_console.py (ids of their own, Playwright's auto-waiting `expect` only).
"""

import json
import re

from playwright.sync_api import expect
from support import new_id
from test_console import execution_status, step_status


def test_retry_a_failed_flaky_step_from_its_page(page, api, base):
    execution_id = new_id("retry")
    # Its four attempts fail: the execution ends in error (execute answers 500).
    status, envelope = api.call(
        "POST", "/workflows/flaky-step/execute", {"input": {"failTimes": 4}, "options": {"executionId": execution_id}}
    )
    assert status == 500, envelope
    assert api.state(execution_id)["status"] == "error"

    page.goto(f"{base}/console/executions/{execution_id}")
    expect(execution_status(page)).to_have_text("error")
    expect(page.get_by_role("region", name="Error")).to_contain_text("attempt 4 failed")
    retry = page.get_by_role("button", name="Retry from the failed step")
    retry.click()

    # It runs again under the same id: the page follows it to its end, the retry in its events.
    expect(execution_status(page)).to_have_text("completed")
    expect(step_status(page, "attempt")).to_have_text("completed")
    expect(page.get_by_role("region", name="Result")).to_contain_text('"attempts": 5')
    events = page.get_by_role("list", name="Events")
    expect(events.locator('li[data-type="workflow-retried"]')).to_have_count(1)
    expect(events.locator('li[data-type="workflow-complete"]')).to_have_count(1)
    expect(retry).to_have_count(0)
    assert api.state(execution_id)["result"] == {"attempts": 5}

    # A completed execution has no Retry (a fork is still offered).
    completed = new_id("no-retry")
    api.execute("flaky-step", {"failTimes": 0}, completed)
    page.goto(f"{base}/console/executions/{completed}")
    expect(execution_status(page)).to_have_text("completed")
    expect(page.get_by_role("button", name="Fork", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Retry from the failed step")).to_have_count(0)


def test_fork_an_order_from_express_fee_with_a_new_input(page, api, base):
    source = new_id("fork-src")
    items = [{"sku": "a", "quantity": 2, "unitPrice": 10}]
    done = api.execute("order-fulfillment", {"orderId": "ord-1", "items": items}, source)
    assert done["status"] == "completed" and done["result"]["shippingFee"] == 0

    page.goto(f"{base}/console/executions/{source}")
    expect(execution_status(page)).to_have_text("completed")
    fork = page.get_by_role("region", name="Fork")
    steps = fork.get_by_label("From step")
    expect(steps.locator("option")).to_have_count(6)
    # The input is prefilled with the execution's own.
    data = fork.get_by_label("Input (JSON)")
    assert json.loads(data.input_value()) == {"orderId": "ord-1", "items": items}

    # Invalid JSON is refused in the browser: nothing is sent.
    forks = []
    page.on("request", lambda r: r.url.endswith("/fork") and forks.append(r))
    steps.select_option("express-fee")
    data.fill('{"orderId": "ord-1", "express": tru')
    fork.get_by_role("button", name="Fork", exact=True).click()
    expect(fork.get_by_role("alert")).to_contain_text("not valid JSON")
    expect(data).to_have_attribute("aria-invalid", "true")
    assert forks == []

    forked = new_id("forked")
    data.fill(json.dumps({"orderId": "ord-1", "items": items, "express": True}))
    fork.get_by_label("New execution id").fill(forked)
    fork.get_by_role("button", name="Fork", exact=True).click()
    expect(fork.get_by_role("alert")).to_have_count(0)
    expect(fork.get_by_text("Forked:")).to_contain_text("completed")
    assert len(forks) == 1
    assert json.loads(forks[0].post_data) == {
        "fromStep": "express-fee",
        "input": {"orderId": "ord-1", "items": items, "express": True},
        "executionId": forked,
    }
    fork.get_by_role("link", name=forked, exact=True).click()

    # The new execution: completed with the express fee, naming its origin.
    expect(page).to_have_url(re.compile(rf"/console/executions/{forked}$"))
    expect(execution_status(page)).to_have_text("completed")
    expect(page.get_by_role("region", name="Result")).to_contain_text('"shippingFee": 15')
    origin = page.get_by_test_id("forked-from")
    expect(origin).to_have_text(f"Forked from {source} at step express-fee")
    expect(origin.get_by_role("link", name=source, exact=True)).to_have_attribute(
        "href", f"/console/executions/{source}"
    )
    assert api.state(forked)["forkedFrom"] == {"executionId": source, "stepId": "express-fee"}

    # A refusal (the id is taken now) shows the server's message.
    page.goto(f"{base}/console/executions/{source}")
    fork = page.get_by_role("region", name="Fork")
    fork.get_by_label("From step").select_option("express-fee")
    fork.get_by_label("New execution id").fill(forked)
    page.watch.expect(409, f"/executions/{source}/fork")
    fork.get_by_role("button", name="Fork", exact=True).click()
    expect(fork.get_by_role("alert")).to_contain_text(f"Execution {forked} already exists")
    expect(fork.get_by_role("link", name=forked, exact=True)).to_have_count(0)


def test_send_an_event_to_a_payment_webhook_from_its_page(page, api, base):
    execution_id = new_id("payment")
    suspended = api.execute("payment-webhook", {"orderId": "o-1"}, execution_id)
    assert suspended["status"] == "suspended"

    page.goto(f"{base}/console/executions/{execution_id}")
    expect(execution_status(page)).to_have_text("suspended")
    suspension = page.get_by_role("region", name="Suspension")
    expect(suspension).to_contain_text("Waits for event payment with key o-1")
    expect(page.get_by_role("list", name="Mailbox")).to_be_hidden()

    send = page.get_by_role("region", name="Send an event")
    expect(send.get_by_label("Event name")).to_have_value("payment")
    send.get_by_label("Data (JSON)").fill('{"amount": 12.5, "status": "paid"}')
    send.get_by_role("button", name="Send event").click()
    expect(send.get_by_text("Delivered:")).to_contain_text("resumed")

    expect(execution_status(page)).to_have_text("completed")
    expect(step_status(page, "confirm")).to_have_text("completed")
    expect(page.get_by_role("region", name="Result")).to_contain_text('"status": "paid"')
    entry = page.get_by_role("list", name="Mailbox").locator("li")
    expect(entry).to_have_count(1)
    expect(entry).to_contain_text("payment")
    expect(entry.locator(".status")).to_have_text("taken")
    expect(entry).to_contain_text("taken by await-payment")
    entry.get_by_text("Data").click()
    expect(entry.locator("pre")).to_contain_text('"amount": 12.5')
    assert api.state(execution_id)["result"] == {"orderId": "o-1", "status": "paid", "amount": 12.5}


def test_versions_show_on_the_execution_and_the_workflow_s_executions(page, api, base):
    execution_id = new_id("version")
    api.execute("word-count", {"text": "one two"}, execution_id)
    version = api.state(execution_id)["version"]
    assert version.startswith("g-"), version
    page.goto(f"{base}/console/executions/{execution_id}")
    expect(page.get_by_test_id("execution-version")).to_have_text(version)
    page.goto(f"{base}/console/executions?workflow=word-count")
    expect(page.get_by_test_id("workflow-versions")).to_contain_text(f"{version}: ")
    expect(page.get_by_test_id("workflow-versions")).to_contain_text("new executions")
