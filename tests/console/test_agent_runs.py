"""Durable agent runs in the console (Chromium, driven by Playwright) against a real server.

The example agent `operator` (offline model) turns `refund order <id> <amount> <reason>` into
lookup_order then issue_refund; a refund over 100 waits for a person's approval (24 h deadline).
Each test starts its own runs, in conversations of its own, and finds them by run id.
"""

import re
import time

from playwright.sync_api import expect
from support import new_id

AGENT = "operator"


def refund(api, order: str, amount: int, why: str) -> dict:
    """Asks the operator for a refund (durable POST /text): its answer, with `runId`, `status`
    and `pendingApprovals` (a refund over 100 waits for approval)."""
    return api.data(
        "POST",
        f"/agents/{AGENT}/text",
        {
            "input": f"refund order {order} {amount} {why}",
            "options": {"conversationId": new_id("conv"), "userId": "console-tests"},
        },
    )


def waiting_refund(api) -> tuple[str, str]:
    """A refund of 250 waiting for approval: its run id and approval id."""
    answer = refund(api, "o-1", 250, "damaged box")
    assert answer["status"] == "suspended", answer
    [approval] = answer["pendingApprovals"]
    assert approval["toolName"] == "issue_refund"
    return answer["runId"], approval["approvalId"]


def run_state(api, run_id: str) -> dict:
    return api.data("GET", f"/agents/{AGENT}/runs/{run_id}")


def suspended_state(api, run_id: str) -> dict:
    """The run's state once it waits for approval. (The chat shows the prompt as the
    `tool-approval-request` chunk arrives; the run is suspended an instant later, and only then
    takes an answer.)"""
    deadline = time.monotonic() + 15
    while True:
        state = run_state(api, run_id)
        if state["status"] == "suspended" or time.monotonic() > deadline:
            assert state["status"] == "suspended", state
            return state
        time.sleep(0.1)


def ended_state(api, run_id: str) -> dict:
    """The run's state once it no longer runs (an answer sent through the API returns when the
    run continues, not when it ends)."""
    deadline = time.monotonic() + 15
    while True:
        state = run_state(api, run_id)
        if state["status"] not in ("running", "suspended") or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def tool_card(page, run_id):
    """The card of a tool call waiting for approval on the approvals page."""
    return (
        page.get_by_role("list", name="Waiting tool calls")
        .get_by_role("article")
        .filter(has=page.get_by_role("link", name=run_id, exact=True))
    )


# ---- The approvals page --------------------------------------------------------------------------


def test_approve_and_deny_refunds_from_the_approvals_page(page, api, base, screenshots):
    approved_id, _ = waiting_refund(api)
    denied_id, _ = waiting_refund(api)

    page.goto(f"{base}/console/approvals")
    card = tool_card(page, approved_id)
    expect(card.get_by_role("heading")).to_contain_text("Operator · issue_refund")
    expect(card.get_by_label("Arguments")).to_contain_text('"amount": 250')
    expect(card.get_by_label("Arguments")).to_contain_text('"orderId": "o-1"')
    expect(card.locator(".countdown")).to_have_text(re.compile(r"^in 2[34] h \d+ min$"))
    expect(card.get_by_role("link", name="Operator")).to_have_attribute("href", "/console/agents/operator")
    screenshots(page, "console-tool-approvals.png", full_page=True)

    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card.get_by_text("Approved: the run is now")).to_be_visible()
    expect(card).to_contain_text("Refunded 250 for order o-1.")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_be_disabled()
    state = run_state(api, approved_id)
    assert state["status"] == "completed"
    assert state["text"] == "Refunded 250 for order o-1."

    # A denial's reason is data: shown as text, never as markup.
    reason = "Photos show no <b>damage</b>"
    card = tool_card(page, denied_id)
    card.get_by_label("Reason").fill(reason)
    card.get_by_role("button", name="Deny", exact=True).click()
    expect(card.get_by_text("Denied: the run is now")).to_be_visible()
    expect(card).to_contain_text(f"The refund of 250 for order o-1 was not approved: {reason}.")
    expect(card.locator("b")).to_have_count(0)
    state = run_state(api, denied_id)
    assert state["status"] == "completed"
    assert reason in state["text"]

    # The list was read again: neither waits now (a new page shows neither).
    other_id, _ = waiting_refund(api)
    page.goto(f"{base}/console/approvals")
    expect(tool_card(page, other_id)).to_be_visible()
    expect(tool_card(page, approved_id)).to_have_count(0)
    expect(tool_card(page, denied_id)).to_have_count(0)
    api.data("POST", f"/agents/{AGENT}/runs/{other_id}/cancel", {"reason": "test over"})


def test_an_approval_answered_elsewhere_says_so(page, api, base):
    run_id, approval_id = waiting_refund(api)
    page.goto(f"{base}/console/approvals")
    card = tool_card(page, run_id)
    expect(card).to_be_visible()

    # Someone else answers just before this page does: the server refuses this one (409).
    def answered_elsewhere(route):
        api.data(
            "POST",
            f"/agents/{AGENT}/runs/{run_id}/approvals/{approval_id}",
            {"approved": False, "reason": "answered elsewhere"},
        )
        route.continue_()

    page.route(re.compile(rf"/agents/{AGENT}/runs/{run_id}/approvals/"), answered_elsewhere)
    page.watch.expect(409, f"/runs/{run_id}/approvals/")
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card.get_by_role("alert")).to_contain_text("this approval is no longer pending")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_be_disabled()
    expect(card.get_by_role("button", name="Deny", exact=True)).to_be_disabled()
    assert "answered elsewhere" in ended_state(api, run_id)["text"]


# ---- The agent page and a run's page ---------------------------------------------------------------


def test_the_agent_page_lists_its_runs_and_a_run_page_answers_its_approval(page, api, base, screenshots):
    done = refund(api, "o-2", 40, "late")
    assert done["status"] == "completed", done
    done_id = done["runId"]
    waiting_id, _ = waiting_refund(api)

    page.goto(f"{base}/console/agents/{AGENT}")
    runs = page.get_by_role("table", name="Runs")
    done_row = runs.get_by_role("row").filter(has=page.get_by_role("link", name=done_id, exact=True))
    waiting_row = runs.get_by_role("row").filter(has=page.get_by_role("link", name=waiting_id, exact=True))
    expect(done_row).to_contain_text("completed")
    expect(waiting_row).to_contain_text("suspended")
    # The newest first.
    ids = runs.locator("tbody td:first-child a").all_inner_texts()
    assert ids.index(waiting_id) < ids.index(done_id)

    # A status filter, in the URL.
    page.get_by_label("Run status").select_option("suspended")
    expect(page).to_have_url(re.compile(rf"/console/agents/{AGENT}\?status=suspended$"))
    expect(runs.get_by_role("link", name=done_id, exact=True)).to_have_count(0)
    runs.get_by_role("link", name=waiting_id, exact=True).click()

    expect(page).to_have_url(re.compile(rf"/console/agents/{AGENT}/runs/{waiting_id}$"))
    expect(page.get_by_role("heading", name=f"Run {waiting_id}", level=1)).to_be_visible()
    expect(page.get_by_test_id("run-status")).to_have_text("suspended")
    steps = page.get_by_role("list", name="Steps")
    expect(steps.locator("li[data-kind]")).to_have_count(4)
    expect(steps.locator("li[data-kind] .step-kind")).to_have_text(["model call", "tool call", "model call", "approval"])
    first = steps.locator('li[data-step-id="model-1"]')
    expect(first).to_contain_text("attempt 1")
    expect(first).to_contain_text(re.compile(r"\d+ tokens \(\d+ in, \d+ out\)"))
    expect(first.locator("time").first).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\dT.*Z$"))
    messages = page.get_by_role("list", name="Messages")
    expect(messages).to_contain_text("refund order o-1 250 damaged box")
    screenshots(page, "console-run.png", full_page=True)

    waiting = page.get_by_role("list", name="Waiting for approval")
    expect(waiting.get_by_label("Arguments")).to_contain_text('"reason": "damaged box"')
    waiting.get_by_label("Reason").fill("receipt checked")
    waiting.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    expect(page.get_by_label("Text", exact=True)).to_have_text("Refunded 250 for order o-1.")
    expect(steps.locator('li[data-kind="approval"]')).to_contain_text("Approved: receipt checked")
    expect(steps.locator("li[data-kind]")).to_have_count(6)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)

    # The run that needed nothing.
    page.goto(f"{base}/console/agents/{AGENT}/runs/{done_id}")
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    expect(page.get_by_label("Text", exact=True)).to_have_text("Refunded 40 for order o-2.")
    expect(page.get_by_role("list", name="Waiting for approval")).to_be_hidden()
    expect(page.get_by_text("None: the run is completed.")).to_be_visible()


def test_the_runs_list_pages_with_the_cursor(page, api, base):
    ids = [refund(api, "o-2", 40, "late")["runId"] for _ in range(30)]

    page.goto(f"{base}/console/agents/{AGENT}?status=completed")
    expect(page.get_by_label("Run status")).to_have_value("completed")
    rows = page.get_by_role("table", name="Runs").locator("tbody tr")
    expect(rows).to_have_count(25)
    expect(page.get_by_role("link", name=ids[-1], exact=True)).to_be_visible()  # the newest first
    expect(page.get_by_role("link", name=ids[0], exact=True)).to_have_count(0)
    page.get_by_role("button", name="Load more").click()
    expect(page.get_by_role("link", name=ids[0], exact=True)).to_be_visible()
    assert rows.count() > 25
    # Every run once, even as the list is read again live.
    links = rows.locator("td:first-child a").all_inner_texts()
    assert len(links) == len(set(links))


def test_cancel_a_waiting_run_from_its_page(page, api, base):
    run_id, _ = waiting_refund(api)
    page.goto(f"{base}/console/agents/{AGENT}/runs/{run_id}")
    expect(page.get_by_test_id("run-status")).to_have_text("suspended")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("run-status")).to_have_text("cancelled")
    expect(page.get_by_role("list", name="Waiting for approval")).to_be_hidden()
    assert run_state(api, run_id)["status"] == "cancelled"


# ---- The chat ------------------------------------------------------------------------------------


def send(page, text: str) -> str:
    """Sends a chat message; the run id its answer names (`x-run-id`). (Send is disabled while
    the page looks for the conversation's active run, and a message sent then is not taken.)"""
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    message = page.get_by_role("textbox", name="Message")
    message.fill(text)
    with page.expect_response(lambda r: r.url.endswith(f"/agents/{AGENT}/chat") and r.request.method == "POST") as chat:
        message.press("Enter")
    return chat.value.headers["x-run-id"]


def test_the_chat_asks_for_approval_survives_a_reload_and_completes(page, api, base, screenshots):
    page.goto(f"{base}/console/agents/{AGENT}")
    expect(page.get_by_role("heading", name="Operator", level=1)).to_be_visible()
    page.get_by_role("button", name="New conversation").click()
    run_id = send(page, "refund order o-1 250 damaged box")

    log = page.get_by_role("log", name="Conversation")
    expect(log.get_by_role("region", name="Tool call: lookup_order")).to_contain_text('"status": "delivered"')
    tool = log.get_by_role("region", name="Tool call: issue_refund")
    prompt = tool.get_by_role("group", name="Approval of issue_refund")
    expect(prompt).to_be_visible()
    expect(tool.get_by_label("Tool input")).to_contain_text('"amount": 250')
    expect(tool).to_contain_text("waiting for approval")
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("Waiting for a person's approval.")
    page.locator("section.chat").evaluate("el => el.scrollIntoView()")
    screenshots(page, "console-chat-approval.png")
    suspended_state(api, run_id)

    # A reload resumes the conversation's run: the same message, its prompt again.
    with page.expect_response(lambda r: re.search(r"/chat/[^/]+/stream$", r.url) is not None) as resumed:
        page.reload()
    assert resumed.value.status == 200
    expect(prompt).to_be_visible()
    expect(log.get_by_role("article", name="Assistant")).to_have_count(1)
    expect(log.get_by_role("article", name="You")).to_have_count(1)

    prompt.get_by_role("button", name="Approve", exact=True).click()
    answer = log.get_by_role("article", name="Assistant")
    expect(answer).to_contain_text("Refunded 250 for order o-1.")
    expect(prompt).to_have_count(0)
    expect(tool).to_contain_text("approved · done")
    expect(tool.get_by_label("Tool result")).to_contain_text('"refundId": "rf-o-1"')
    expect(answer).to_contain_text("stop")
    expect(answer.get_by_role("link", name="View the run")).to_have_attribute(
        "href", f"/console/agents/{AGENT}/runs/{run_id}"
    )
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    state = run_state(api, run_id)
    assert state["status"] == "completed"
    assert state["text"] == "Refunded 250 for order o-1."

    # Nothing active any more (204): a reload shows the conversation as it ended.
    with page.expect_response(lambda r: re.search(r"/chat/[^/]+/stream$", r.url) is not None) as resumed:
        page.reload()
    assert resumed.value.status == 204
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("Refunded 250 for order o-1.")
    expect(prompt).to_have_count(0)

    # A denial with a reason, in the same conversation.
    send(page, "refund order o-1 250 damaged box")
    tool = log.get_by_role("article", name="Assistant").last.get_by_role("region", name="Tool call: issue_refund")
    prompt = tool.get_by_role("group", name="Approval of issue_refund")
    prompt.get_by_label("Reason").fill("already refunded")
    prompt.get_by_role("button", name="Deny", exact=True).click()
    expect(log.get_by_role("article", name="Assistant").last).to_contain_text(
        "The refund of 250 for order o-1 was not approved: already refunded."
    )
    expect(tool).to_contain_text("denied")


def test_a_chat_prompt_answered_elsewhere_shows_what_the_run_did(page, api, base):
    page.goto(f"{base}/console/agents/{AGENT}")
    page.get_by_role("button", name="New conversation").click()
    run_id = send(page, "refund order o-1 250 damaged box")
    log = page.get_by_role("log", name="Conversation")
    prompt = log.get_by_role("group", name="Approval of issue_refund")
    expect(prompt).to_be_visible()
    [approval] = suspended_state(api, run_id)["pendingApprovals"]

    # Approved on the approvals page (here: the API) meanwhile; Deny here is refused (409), said
    # clearly, and the message shows what the run did.
    api.data("POST", f"/agents/{AGENT}/runs/{run_id}/approvals/{approval['approvalId']}", {"approved": True})
    page.watch.expect(409, f"/agents/{AGENT}/chat")
    prompt.get_by_role("button", name="Deny", exact=True).click()
    expect(page.get_by_test_id("chat-alert")).to_contain_text("this approval is no longer pending")
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("Refunded 250 for order o-1.")
    expect(prompt).to_have_count(0)

    # A prompt kept from before whose run waits no more: after a reload, read again from its run.
    page.get_by_role("button", name="New conversation").click()
    run_id = send(page, "refund order o-1 250 damaged box")
    expect(prompt).to_be_visible()
    [approval] = suspended_state(api, run_id)["pendingApprovals"]
    api.data(
        "POST",
        f"/agents/{AGENT}/runs/{run_id}/approvals/{approval['approvalId']}",
        {"approved": False, "reason": "no"},
    )
    page.reload()
    expect(log.get_by_role("article", name="Assistant")).to_contain_text(
        "The refund of 250 for order o-1 was not approved: no."
    )
    expect(prompt).to_have_count(0)


# ---- Good manners -----------------------------------------------------------------------------------


def test_the_run_views_fit_a_phone(page, api, base):
    run_id, _ = waiting_refund(api)
    page.set_viewport_size({"width": 360, "height": 740})
    views = {
        "/console/approvals": "Approvals",
        f"/console/agents/{AGENT}": "Operator",
        f"/console/agents/{AGENT}/runs/{run_id}": f"Run {run_id}",
    }
    for path, heading in views.items():
        page.goto(base + path)
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        if path == "/console/approvals":
            expect(tool_card(page, run_id)).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow} px wider than a 360 px screen"

    # A run that does not exist: the server's message.
    page.watch.expect(404, f"/agents/{AGENT}/runs/no-such-run")
    page.goto(f"{base}/console/agents/{AGENT}/runs/no-such-run")
    expect(page.get_by_role("alert")).to_contain_text("Run no-such-run of agent operator not found")
    api.data("POST", f"/agents/{AGENT}/runs/{run_id}/cancel", {})


def test_an_a2a_task_shows_as_the_run_it_is(page, api, base):
    """A task sent over A2A (JSON-RPC `SendMessage`) is a run of the agent, marked `a2a` in the
    runs list and on its page."""
    import json
    import urllib.request

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": new_id("msg"), "role": "ROLE_USER",
                               "parts": [{"text": "refund order o-3 20 scratched"}]}},
    }
    request = urllib.request.Request(
        f"{base}/a2a/{AGENT}", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "A2A-Version": "1.0"})
    with urllib.request.urlopen(request, timeout=60) as r:
        task = json.loads(r.read())["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert run_state(api, task["id"])["origin"] == "a2a"

    page.goto(f"{base}/console/agents/{AGENT}")
    row = page.get_by_role("table", name="Runs").get_by_role("row").filter(
        has=page.get_by_role("link", name=task["id"], exact=True))
    expect(row).to_contain_text("a2a")
    row.get_by_role("link", name=task["id"], exact=True).click()
    expect(page.get_by_text("A2A task")).to_be_visible()
