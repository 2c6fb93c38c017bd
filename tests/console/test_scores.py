"""Live scores in the console (Chromium, driven by Playwright) against a real server.

The example `assistant` scores each of its generations after the answer (relevance and
faithfulness judged by the offline model, latency and tokens): the agent's page lists its recent
scores with each scorer's mean and a scorer filter, and a durable run's page shows its own.
"""

import time

from playwright.sync_api import expect
from support import new_id

AGENT = "assistant"


def scored_run(api, text: str) -> str:
    """A durable run of the assistant on `text`, once its four scores are stored: its id."""
    answer = api.data(
        "POST",
        f"/agents/{AGENT}/text",
        {"input": text, "options": {"durable": True, "conversationId": new_id("conv")}},
    )
    run_id = answer["runId"]
    deadline = time.monotonic() + 15
    while True:
        state = api.data("GET", f"/agents/{AGENT}/runs/{run_id}")
        if len(state["scores"]) == 4 or time.monotonic() > deadline:
            assert len(state["scores"]) == 4, state
            return run_id
        time.sleep(0.1)


def test_the_agent_page_lists_its_scores_and_filters_them(page, api, base):
    run_id = scored_run(api, "What is the weather in Oslo?")
    page.goto(f"{base}/console/agents/{AGENT}")
    section = page.get_by_role("region", name="Scores")
    table = section.get_by_role("table", name="Scores")
    row = table.get_by_role("row").filter(has=page.get_by_role("link", name=run_id, exact=True))
    expect(row).to_have_count(4)
    latency = row.filter(has_text="latency")
    expect(latency).to_contain_text("1.000")
    expect(latency).to_contain_text("passed")
    # The run's link opens its page.
    expect(row.first.get_by_role("link", name=run_id)).to_have_attribute(
        "href", f"/console/agents/{AGENT}/runs/{run_id}"
    )
    expect(page.get_by_test_id("live-scoring")).to_have_text(
        "relevance, faithfulness, latency, tokens · 100% of generations"
    )
    means = section.get_by_role("list", name="Mean by scorer")
    expect(means.locator('[data-scorer="tokens"]')).to_contain_text("tokens 1.000")

    # One scorer's only.
    section.get_by_label("Scorer", exact=True).fill("relevance")
    section.get_by_role("button", name="Filter").click()
    expect(table.locator("tbody tr").first).to_have_attribute("data-scorer", "relevance")
    expect(table.locator('tbody tr:not([data-scorer="relevance"])')).to_have_count(0)
    expect(means.locator("li")).to_have_count(1)


def test_a_run_page_shows_its_scores(page, api, base):
    run_id = scored_run(api, "calculate 6 * 7")
    state = api.data("GET", f"/agents/{AGENT}/runs/{run_id}")
    page.goto(f"{base}/console/agents/{AGENT}/runs/{run_id}")
    section = page.get_by_role("region", name="Scores")
    rows = section.get_by_role("table", name="Scores").locator("tbody tr")
    expect(rows).to_have_count(4)
    for score in state["scores"]:
        row = section.locator(f'tbody tr[data-scorer="{score["scorer"]}"]')
        expect(row).to_contain_text(f'{score["value"]:.3f}')
        expect(row).to_contain_text(score["reason"])
    # The calculator's 42 backs the answer.
    expect(section.locator('tbody tr[data-scorer="faithfulness"]')).to_contain_text("1.000")
