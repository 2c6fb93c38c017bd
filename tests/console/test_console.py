"""The operator console in a real browser (Chromium, driven by Playwright) against real servers.

Each test makes its own executions (ids of its own, see `new_id`) through the API and finds
them in the console by id: tests are independent of each other and of their order. Waiting is
Playwright's auto-waiting `expect` only. Every page is watched for console errors and failed
requests (conftest.py).
"""

import json
import re

from playwright.sync_api import expect
from support import Api, new_id


def step(page, step_id):
    """A step of the timeline on an execution page."""
    return page.get_by_role("list", name="Timeline").locator(f'li[data-step-id="{step_id}"]')


def step_status(page, step_id):
    return step(page, step_id).get_by_test_id("step-status").first


def execution_status(page):
    return page.get_by_test_id("execution-status")


def approval_card(page, execution_id):
    return page.get_by_role("article").filter(has=page.get_by_role("link", name=execution_id, exact=True))


# ---- Overview and executions ---------------------------------------------------------------------


def test_overview_shows_workflows_counts_agents_and_server(page, api, base, screenshots):
    execution_id = new_id("overview")
    api.execute("word-count", {"text": "one two three"}, execution_id)
    api.execute("expense-approval", {"employeeId": "e-3", "amount": 1200, "category": "train"}, new_id("overview"))
    info = api.data("GET", "/api/info")

    page.goto(f"{base}/console")
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    expect(page.get_by_text(f"agentry {info['version']} · database {info['database']}")).to_be_visible()
    # Readiness, as /readyz tells an orchestrator.
    expect(page.locator("#readiness")).to_have_text("ready")
    workflows = page.get_by_role("table", name="Workflows")
    for name in ["Expense Approval", "Countdown", "Approval With a Deadline", "Word Count"]:
        expect(workflows.get_by_role("link", name=name, exact=True)).to_be_visible()
    agents = page.get_by_role("list", name="Agents")
    for name in ["Assistant", "Writer", "Supervisor"]:
        expect(agents.get_by_role("link", name=name, exact=True)).to_be_visible()
    for view in ["Executions", "Approvals", "Agents", "Logs"]:
        expect(page.get_by_role("navigation", name="Console").get_by_role("link", name=view)).to_be_visible()
    completed = workflows.get_by_role("link", name="word-count: completed")
    expect(completed).not_to_have_text("0")
    expect(workflows.get_by_role("link", name="expense-approval: suspended")).not_to_have_text("0")
    screenshots(page, "console-overview.png", full_page=True)

    # A count links to the executions list with its filters in the URL.
    completed.click()
    expect(page).to_have_url(re.compile(r"/console/executions\?workflow=word-count&status=completed$"))
    expect(page.get_by_label("Workflow")).to_have_value("word-count")
    expect(page.get_by_label("Status")).to_have_value("completed")
    expect(page.get_by_role("link", name=execution_id)).to_be_visible()


def test_executions_list_filters_in_the_url_and_updates_live(page, api, base):
    page.goto(f"{base}/console/executions")
    expect(page.get_by_role("heading", name="Executions", level=1)).to_be_visible()
    page.get_by_label("Workflow").select_option("word-count")
    expect(page).to_have_url(re.compile(r"/console/executions\?workflow=word-count$"))
    page.get_by_label("Status").select_option("completed")
    expect(page).to_have_url(re.compile(r"/console/executions\?workflow=word-count&status=completed$"))

    # Started after the page opened: it appears without a reload.
    execution_id = new_id("live-list")
    api.execute("word-count", {"text": "appears by itself"}, execution_id)
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=execution_id, exact=True))
    expect(row).to_contain_text("completed")
    expect(row.locator("time").first).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\dT.*Z$"))

    # The filters are a URL that can be shared: opening it shows the same list.
    page.goto(page.url)
    expect(page.get_by_label("Workflow")).to_have_value("word-count")
    expect(page.get_by_role("link", name=execution_id, exact=True)).to_be_visible()

    # Another status hides it.
    page.get_by_label("Status").select_option("error")
    expect(page.get_by_role("link", name=execution_id, exact=True)).to_have_count(0)


def test_executions_list_pages_with_the_cursor(page, api, base):
    ids = [new_id(f"page{i:02}") for i in range(30)]
    for execution_id in ids:
        api.execute("word-count", {"text": execution_id}, execution_id)

    page.goto(f"{base}/console/executions?workflow=word-count")
    rows = page.get_by_role("table", name="Executions").locator("tbody tr")
    expect(rows).to_have_count(25)
    expect(page.get_by_role("link", name=ids[-1], exact=True)).to_be_visible()  # the newest first
    expect(page.get_by_role("link", name=ids[0], exact=True)).to_have_count(0)
    page.get_by_role("button", name="Load more").click()
    expect(page.get_by_role("link", name=ids[0], exact=True)).to_be_visible()
    assert rows.count() > 25
    # Every execution once, even as the list is read again live.
    links = rows.locator("td:first-child a").all_inner_texts()
    assert len(links) == len(set(links))


# ---- Approvals -------------------------------------------------------------------------------------


def test_resume_an_expense_from_approvals(page, api, base, screenshots):
    execution_id = new_id("expense")
    suspended = api.execute(
        "expense-approval", {"employeeId": "e-42", "amount": 1500, "category": "travel"}, execution_id
    )
    assert suspended["status"] == "suspended"

    page.goto(f"{base}/console/approvals")
    card = approval_card(page, execution_id)
    expect(card).to_contain_text("Manager approval required for amounts over 1000")
    expect(card).to_contain_text('"amount": 1500')  # the suspend data
    screenshots(page, "console-approvals.png", full_page=True)

    card.get_by_label("managerId", exact=True).fill("m-7")
    card.get_by_label("approved", exact=True).check()
    card.get_by_role("button", name="Resume", exact=True).click()
    expect(card.get_by_text("Resumed: the execution is now")).to_be_visible()
    card.get_by_role("link", name="Open the execution").click()

    expect(page).to_have_url(re.compile(rf"/console/executions/{execution_id}$"))
    expect(execution_status(page)).to_have_text("completed")
    expect(step_status(page, "check-approval")).to_have_text("completed")
    expect(step_status(page, "record-decision")).to_have_text("completed")
    expect(page.get_by_role("region", name="Result")).to_contain_text('"approvedBy": "m-7"')
    assert api.state(execution_id)["result"]["status"] == "approved"


def test_a_refused_resume_shows_the_servers_message_and_changes_nothing(page, api, base):
    execution_id = new_id("refused")
    api.execute("expense-approval", {"employeeId": "e-7", "amount": 2500, "category": "gear"}, execution_id)

    page.goto(f"{base}/console/approvals")
    card = approval_card(page, execution_id)
    resume = card.get_by_role("button", name="Resume", exact=True)
    resumes = []
    page.on("request", lambda r: "/resume" in r.url and resumes.append(r))

    # The browser checks the schema's rules first: a required managerId is missing, nothing is sent.
    resume.click()
    expect(card.get_by_label("managerId", exact=True)).to_have_attribute("aria-invalid", "true")
    assert resumes == []

    # A value the form cannot produce (approved: "yes") reaches the server, as a client bypassing
    # the form would send it: the server refuses it with a 400, shown beside the form.
    def tamper(route):
        route.continue_(post_data=json.dumps({"resumeData": {"approved": "yes", "managerId": "m-1"}}))

    page.route(re.compile(rf"/executions/{execution_id}/resume$"), tamper)
    page.watch.expect(400, f"/executions/{execution_id}/resume")
    card.get_by_label("managerId", exact=True).fill("m-1")
    resume.click()
    alert = card.get_by_role("alert").filter(has_text="Resume data validation failed")
    expect(alert).to_be_visible()

    # Nothing changed: still suspended, the form still there, ready for a good try.
    expect(card.get_by_label("managerId", exact=True)).to_have_value("m-1")
    expect(resume).to_be_enabled()
    assert api.state(execution_id)["status"] == "suspended"
    page.goto(f"{base}/console/executions/{execution_id}")
    expect(execution_status(page)).to_have_text("suspended")


def test_resume_forms_follow_the_schema(page, base):
    """The generator on a schema richer than the examples': each kind of property gets its
    control, with the schema's bounds, and nothing is sent until every rule holds."""
    page.goto(f"{base}/console/agents")
    expect(page.get_by_role("heading", name="Agents", level=1)).to_be_visible()
    schema = {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "level": {"type": "integer", "minimum": 1, "maximum": 5},
            "ratio": {"type": "number", "exclusiveMaximum": 1},
            "decision": {"enum": ["approve", "reject", "escalate"]},
            "note": {"type": "string", "minLength": 3, "pattern": "^[a-z ]+$"},
        },
        "required": ["approved", "level", "decision"],
    }
    page.evaluate(
        """async (schema) => {
            const { schemaForm } = await import("/console/assets/schema-form.js");
            window.sent = [];
            const { form } = schemaForm(schema, {
                submitLabel: "Resume",
                onSubmit: async (value) => { window.sent.push(value); },
            });
            document.querySelector("main").replaceChildren(form);
        }""",
        schema,
    )
    expect(page.get_by_label("approved", exact=True)).to_have_attribute("type", "checkbox")
    level = page.get_by_label("level", exact=True)
    expect(level).to_have_attribute("type", "number")
    expect(level).to_have_attribute("min", "1")
    expect(level).to_have_attribute("max", "5")
    expect(level).to_have_attribute("required", "")
    decision = page.get_by_label("decision", exact=True)
    expect(decision.locator("option")).to_have_text(["Choose…", "approve", "reject", "escalate"])
    note = page.get_by_label("note", exact=True)
    expect(note).to_have_attribute("type", "text")
    expect(note).not_to_have_attribute("required", "")

    resume = page.get_by_role("button", name="Resume", exact=True)
    level.fill("9")  # above the maximum
    decision.select_option("reject")
    resume.click()
    expect(level).to_have_attribute("aria-invalid", "true")
    level.fill("3")
    page.get_by_label("ratio", exact=True).fill("1")  # not below the exclusive maximum
    resume.click()
    expect(page.get_by_label("ratio", exact=True)).to_have_attribute("aria-invalid", "true")
    page.get_by_label("ratio", exact=True).fill("0.5")
    note.fill("No")  # too short, and not the pattern
    resume.click()
    expect(note).to_have_attribute("aria-invalid", "true")
    assert page.evaluate("window.sent") == []

    note.fill("looks right")
    page.get_by_label("approved", exact=True).check()
    resume.press("Enter")
    page.wait_for_function("window.sent.length === 1")
    assert page.evaluate("window.sent[0]") == {
        "approved": True,
        "level": 3,
        "ratio": 0.5,
        "decision": "reject",
        "note": "looks right",
    }


# ---- One execution, live ---------------------------------------------------------------------------


def test_countdown_steps_complete_live_on_its_page(page, api, base, screenshots):
    execution_id = new_id("countdown")
    api.start("countdown", {"stepDelayMs": 1000}, execution_id)

    page.goto(f"{base}/console/executions/{execution_id}")
    expect(page.get_by_role("heading", name=f"Execution {execution_id}")).to_be_visible()
    # Seen running, then every tick completing as it happens, then the whole execution.
    expect(execution_status(page)).to_have_text("running")
    for tick in ["tick-5", "tick-4", "tick-3", "tick-2", "tick-1"]:
        expect(step_status(page, tick)).to_have_text("completed")
    expect(execution_status(page)).to_have_text("completed")
    events = page.get_by_role("list", name="Events")
    expect(events.locator('li[data-type="step-complete"]')).to_have_count(5)
    expect(events.locator('li[data-type="workflow-complete"]')).to_have_count(1)
    expect(page.get_by_role("region", name="Result")).to_contain_text('"remaining": 0')
    expect(page.get_by_text("The execution is completed: no more events.")).to_be_visible()
    step(page, "tick-1").get_by_text("Output").click()
    expect(step(page, "tick-1").locator("pre").last).to_contain_text('"remaining": 0')
    screenshots(page, "console-execution.png", full_page=True)


def test_cancel_a_running_countdown_from_its_page(page, api, base):
    execution_id = new_id("cancel")
    api.start("countdown", {"stepDelayMs": 5000}, execution_id)

    page.goto(f"{base}/console/executions/{execution_id}")
    expect(execution_status(page)).to_have_text("running")
    page.get_by_role("button", name="Cancel execution").click()
    expect(execution_status(page)).to_have_text("cancelled")
    expect(page.get_by_role("region", name="Cancellation")).to_contain_text("Cancelled from the console")
    expect(page.get_by_role("button", name="Cancel execution")).to_have_count(0)
    assert api.state(execution_id)["status"] == "cancelled"


def test_suspend_and_resume_a_countdown_from_its_page(page, api, base):
    execution_id = new_id("suspend")
    api.start("countdown", {"stepDelayMs": 400}, execution_id)

    page.goto(f"{base}/console/executions/{execution_id}")
    expect(execution_status(page)).to_have_text("running")
    page.get_by_label("Reason").fill("Paused by the operator")
    page.get_by_label("Reason").press("Enter")
    expect(execution_status(page)).to_have_text("suspended")
    expect(page.get_by_role("region", name="Suspension")).to_contain_text("Paused by the operator")

    # Countdown has no resume schema: its form has one optional JSON field.
    page.get_by_role("button", name="Resume", exact=True).click()
    expect(execution_status(page)).to_have_text("completed")
    expect(step_status(page, "tick-1")).to_have_text("completed")


def test_an_approval_deadline_shows_and_expires_on_its_own(page, api, base):
    execution_id = new_id("deadline")
    suspended = api.execute("approval-deadline", {"requestId": "r-9", "timeoutMs": 2500}, execution_id)
    deadline = suspended["suspension"]["deadline"]

    page.goto(f"{base}/console/executions/{execution_id}")
    suspension = page.get_by_role("region", name="Suspension")
    expect(suspension).to_contain_text("Approval required within 2500 ms")
    expect(suspension).to_contain_text("Deadline")
    expect(suspension.locator(f'time[datetime="{deadline}"]')).to_have_attribute("title", deadline)
    expect(suspension.locator(".countdown")).to_have_text(re.compile(r"^(in \d+ s|passed \d+ s ago)$"))

    # Nobody resumes it: at the deadline it resumes by itself and expires, while the page is open.
    expect(execution_status(page)).to_have_text("completed", timeout=30_000)
    expect(page.get_by_role("region", name="Result")).to_contain_text('"status": "expired"')
    expect(step_status(page, "await-approval")).to_have_text("completed")


# ---- Agents ----------------------------------------------------------------------------------------


def test_chat_with_the_assistant_shows_the_tool_call_and_the_answer(page, base, screenshots):
    page.goto(f"{base}/console/agents/assistant")
    expect(page.get_by_role("heading", name="Assistant", level=1)).to_be_visible()
    expect(page.get_by_text("get_weather").first).to_be_visible()

    # The page first looks for the conversation's active run (Send is disabled meanwhile, and
    # a message sent then is not taken).
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    message = page.get_by_role("textbox", name="Message")
    message.fill("What is the weather in Paris?")
    message.press("Enter")

    log = page.get_by_role("log", name="Conversation")
    tool = log.get_by_role("region", name="Tool call: get_weather")
    expect(tool).to_contain_text('"city": "Paris"')
    expect(tool.get_by_label("Tool result")).to_contain_text('"condition": "sunny"')
    expect(tool).to_contain_text("done")
    answer = log.get_by_role("article", name="Assistant").last
    expect(answer).to_contain_text(re.compile(r"21.*sunny|sunny.*21"))
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    screenshots(page, "console-chat.png", full_page=True)

    # A new conversation starts empty, with another id.
    old = page.get_by_text(re.compile(r"^console-[0-9a-f]+$")).inner_text()
    page.get_by_role("button", name="New conversation").click()
    expect(log.get_by_role("article")).to_have_count(0)
    expect(page.get_by_text(re.compile(r"^console-[0-9a-f]+$"))).not_to_have_text(old)


# ---- Logs ------------------------------------------------------------------------------------------


def test_logs_follow_live_with_filters_in_the_url(page, api, base):
    execution_id = new_id("logs")
    page.goto(f"{base}/console/logs?executionId={execution_id}")
    expect(page.get_by_label("Execution id")).to_have_value(execution_id)
    expect(page.get_by_text("Live: following /ws/logs.")).to_be_visible()

    api.execute("word-count", {"text": "logged"}, execution_id)
    records = page.get_by_role("list", name="Log records")
    expect(records.get_by_text("execution started")).to_be_visible()
    expect(records.get_by_text("execution finished")).to_be_visible()

    page.get_by_label("Level").select_option("error")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(rf"/console/logs\?level=error&executionId={execution_id}$"))
    expect(records.get_by_text("execution started")).to_have_count(0)


def test_in_strict_mode_the_logs_are_polled_and_each_record_shown_once(page, strict_base, admin_token):
    # A browser cannot send a token on a WebSocket: in strict mode the tail polls GET /api/logs,
    # asking again from the newest record's millisecond (records share milliseconds), and must
    # neither miss nor repeat a record.
    execution_id = new_id("strict-logs")
    page.goto(f"{strict_base}/console/logs?executionId={execution_id}")
    page.get_by_label("Access token").fill(admin_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Polling GET /api/logs every 2 s")).to_be_visible()

    Api(strict_base, admin_token).execute("word-count", {"text": "polled"}, execution_id)
    records = page.get_by_role("list", name="Log records")
    expect(records.get_by_text("execution finished")).to_be_visible()
    # Two more polls, each from the last record's millisecond: nothing shown twice.
    with page.expect_response(lambda r: "/api/logs?" in r.url and "since=" in r.url):
        pass
    with page.expect_response(lambda r: "/api/logs?" in r.url and "since=" in r.url):
        pass
    expect(records.get_by_text("execution started")).to_have_count(1)
    expect(records.get_by_text("execution finished")).to_have_count(1)


# ---- Good manners -----------------------------------------------------------------------------------


def test_every_view_is_a_url_and_fits_a_phone(page, api, base):
    execution_id = new_id("phone")
    api.execute("expense-approval", {"employeeId": "e-1", "amount": 5000, "category": "phone"}, execution_id)
    page.set_viewport_size({"width": 360, "height": 740})
    views = {
        "/console": "Overview",
        "/console/executions?status=suspended": "Executions",
        f"/console/executions/{execution_id}": f"Execution {execution_id}",
        "/console/approvals": "Approvals",
        "/console/agents": "Agents",
        "/console/agents/assistant": "Assistant",
        "/console/logs": "Logs",
    }
    for path, heading in views.items():
        page.goto(base + path)
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow} px wider than a 360 px screen"

    # An unknown view says so (and links home) rather than showing an empty page.
    page.goto(f"{base}/console/no-such-view")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()

    # The header's links route in the page, with the keyboard too.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/console")
    nav = page.get_by_role("navigation", name="Console")
    nav.get_by_role("link", name="Approvals").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/console/approvals$"))
    expect(nav.get_by_role("link", name="Approvals")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("heading", name="Approvals", level=1)).to_be_focused()
    page.go_back()
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()


# ---- Authentication ------------------------------------------------------------------------------


def test_with_jwt_the_console_asks_for_a_token_and_refuses_an_expired_one(page, jwt_base, expired_token):
    page.goto(f"{jwt_base}/console")
    page.watch.expect(401, "/api/me")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    token = page.get_by_label("Access token")
    expect(token).to_have_attribute("type", "password")
    token.fill(expired_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Token expired")
    # Not kept: a reload asks again.
    assert page.evaluate("sessionStorage.length") == 0
    page.reload()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

    # A malformed token is refused with the server's reason.
    page.get_by_label("Access token").fill("not-a-token")
    page.get_by_label("Access token").press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("Invalid token")


def test_with_jwt_a_valid_token_opens_the_console_and_cancel_works(page, jwt_base, jwt_api, valid_token):
    execution_id = new_id("jwt-cancel")
    jwt_api.start("countdown", {"stepDelayMs": 5000}, execution_id)

    page.goto(f"{jwt_base}/console/executions/{execution_id}")
    page.get_by_label("Access token").fill(valid_token)
    page.get_by_role("button", name="Sign in").click()
    # The view asked for is shown once signed in.
    expect(execution_status(page)).to_have_text("running")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    page.get_by_role("button", name="Cancel execution").click()  # a protected route
    expect(execution_status(page)).to_have_text("cancelled")

    page.get_by_role("navigation", name="Console").get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    expect(page.get_by_role("table", name="Workflows").get_by_role("link", name="countdown: cancelled")).not_to_have_text("0")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_with_jwt_a_refusal_during_use_shows_a_banner(page, jwt_base, jwt_api, valid_token, expired_token):
    execution_id = new_id("jwt-banner")
    jwt_api.start("countdown", {"stepDelayMs": 5000}, execution_id)
    page.goto(f"{jwt_base}/console/executions/{execution_id}")
    page.get_by_label("Access token").fill(valid_token)
    page.get_by_role("button", name="Sign in").click()
    expect(execution_status(page)).to_have_text("running")

    # The token expires while the page is open: the next protected call is refused.
    page.evaluate("t => sessionStorage.setItem('agentry.console.token', t)", expired_token)
    page.watch.expect(401, f"/executions/{execution_id}/cancel")
    page.get_by_role("button", name="Cancel execution").click()
    banner = page.get_by_role("alert").filter(has_text="Not authorized")
    expect(banner).to_contain_text("Token expired")
    assert jwt_api.state(execution_id)["status"] == "running"
    jwt_api.data("POST", f"/workflows/countdown/executions/{execution_id}/cancel", {})

    banner.get_by_role("button", name="Sign in again").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_with_jwt_an_expired_token_kept_from_before_is_refused(page, jwt_base, expired_token):
    page.add_init_script(f"sessionStorage.setItem('agentry.console.token', {json.dumps(expired_token)})")
    page.watch.expect(401, "/api/me")
    page.goto(f"{jwt_base}/console/approvals")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Token expired")
