"""An agent's guardrails, fallbacks, budget and token usage on its console page (Chromium, driven
by Playwright) against a real server with the examples: `operator` redacts its answers and
refuses long messages; every agent counts the tokens its model calls spend per user and day."""

import re

from playwright.sync_api import expect
from support import new_id


def test_the_operators_guardrails_are_listed(page, base):
    page.goto(f"{base}/console/agents/operator")
    guardrails = page.get_by_test_id("guardrails")
    expect(guardrails).to_contain_text("input: input-length")
    expect(guardrails).to_contain_text("output: pii-redaction")


def test_token_usage_is_shown_per_user(page, api, base, screenshots):
    user = new_id("usage")
    page.goto(f"{base}/console/agents/assistant")
    section = page.get_by_role("region", name="Token usage")
    section.get_by_label("User id").fill(user)
    section.get_by_role("button", name="Show usage").click()
    today = section.locator("#usage-today")
    expect(today).to_contain_text(": 0 tokens")
    expect(today).to_contain_text("no daily budget")
    expect(section).to_contain_text("No tokens spent in the last 7 days.")

    answer = api.data("POST", "/agents/assistant/text", {"input": "hello there", "options": {"userId": user}})
    spent = answer["usage"]["totalTokens"]
    # Usage is counted as answers come, off the request path: show it again until it is there.
    for _ in range(50):
        section.get_by_role("button", name="Show usage").click()
        try:
            expect(today).to_contain_text(f": {spent} tokens", timeout=200)
            break
        except AssertionError:
            continue
    expect(today).to_contain_text(f": {spent} tokens")
    table = section.get_by_role("table", name="Tokens per day")
    expect(table.get_by_role("row")).to_have_count(2)
    expect(table).to_contain_text(re.compile(rf"\d{{4}}-\d{{2}}-\d{{2}}\s*{spent}"))
    screenshots(page, "console-usage.png", full_page=True)
