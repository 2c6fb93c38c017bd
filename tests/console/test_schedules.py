"""Schedules in the console (Chromium, driven by Playwright) against a real server: the list,
pause, unpause, trigger, and a schedule's recent fires with links to their executions.

Each test makes schedules of its own (ids from `new_id`), paused, so that nothing fires but what
the test triggers, and deletes them at the end.
"""

import re
import time
from urllib.parse import quote

from playwright.sync_api import expect
from support import new_id


def paused_schedule(api, workflow="word-count", input=None) -> str:
    """A schedule of `workflow` each minute, created paused: its id."""
    schedule_id = new_id("sched")
    api.data(
        "POST",
        "/schedules",
        {
            "id": schedule_id,
            "workflowId": workflow,
            "cron": "0 * * * * *",
            "input": input if input is not None else {"text": "from the console"},
            "paused": True,
        },
    )
    return schedule_id


def row(page, schedule_id):
    return page.get_by_role("table", name="Schedules").locator(f'tr[data-schedule-id="{schedule_id}"]')


def test_the_schedules_page_pauses_unpauses_and_triggers(page, api, base, screenshots):
    schedule_id = paused_schedule(api)
    page.goto(f"{base}/console/schedules")
    expect(page.get_by_role("link", name="Schedules", exact=True)).to_have_attribute("aria-current", "page")
    r = row(page, schedule_id)
    expect(r).to_contain_text("word-count")
    expect(r).to_contain_text("0 * * * * *")
    expect(r.locator(".status")).to_have_text("paused")
    expect(r).to_contain_text("never")
    # The example registry's schedule is there too, paused.
    expect(row(page, "nightly-report").locator(".status").first).to_have_text("paused")

    r.get_by_role("button", name="Unpause").click()
    expect(r.locator(".status").first).to_have_text("active")
    assert api.data("GET", f"/schedules/{schedule_id}")["paused"] is False
    r.get_by_role("button", name="Pause").click()
    expect(r.locator(".status").first).to_have_text("paused")
    assert api.data("GET", f"/schedules/{schedule_id}")["paused"] is True

    # Trigger fires it now, paused or not: the last fire links to its execution.
    r.get_by_role("button", name="Trigger").click()
    link = r.get_by_role("link", name=re.compile(rf"^{re.escape(schedule_id)}@"))
    expect(link).to_be_visible()
    execution_id = link.inner_text()
    screenshots(page, "console-schedules.png", full_page=True)
    deadline = time.monotonic() + 15
    while api.state(execution_id)["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    link.click()
    expect(page).to_have_url(re.compile(rf"/console/executions/{re.escape(quote(execution_id, safe=''))}$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text(execution_id)
    api.data("DELETE", f"/schedules/{schedule_id}")


def test_a_schedule_page_shows_its_recent_fires_with_their_status(page, api, base):
    schedule_id = paused_schedule(api, "countdown", {"stepDelayMs": 0})
    fired = api.data("POST", f"/schedules/{schedule_id}/trigger")
    page.goto(f"{base}/console/schedules")
    row(page, schedule_id).get_by_role("link", name=schedule_id, exact=True).click()
    expect(page).to_have_url(re.compile(rf"/console/schedules/{re.escape(schedule_id)}$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text(schedule_id)
    fires = page.get_by_role("table", name="Recent fires")
    first = fires.locator("tbody tr").first
    expect(first).to_contain_text("trigger")
    expect(first.get_by_role("link", name=fired["executionId"], exact=True)).to_be_visible()
    # Its execution's status now, read live.
    expect(first.locator(".status")).to_have_text("completed")
    expect(page.get_by_text("none (paused)")).to_be_visible()

    page.get_by_role("button", name="Trigger").click()
    expect(fires.locator("tbody tr")).to_have_count(2)
    page.get_by_role("button", name="Unpause").click()
    expect(page.locator("dd .status").first).to_have_text("active")
    api.data("DELETE", f"/schedules/{schedule_id}")
