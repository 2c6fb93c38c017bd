"""An agent's working memory on its console page (Chromium, driven by Playwright) against a real
server: the example `assistant` keeps the user's preferred city and units (scope `user`); the
offline model updates them on `remember that I prefer <units> units in <City>`."""

from playwright.sync_api import expect
from support import new_id

AGENT = "assistant"


def memory_section(page):
    return page.get_by_role("region", name="Working memory")


def test_the_working_memory_is_shown_edited_and_refused_when_invalid(page, api, base, screenshots):
    user = new_id("wm")
    page.goto(f"{base}/console/agents/{AGENT}")
    section = memory_section(page)
    # The chat's user by default (`console`), whose memory may be anything: look at a fresh user.
    expect(section.get_by_label("User id")).to_have_value("console")
    section.get_by_label("User id").fill(user)
    section.get_by_role("button", name="Show").click()
    value = section.get_by_label("Working memory value")
    expect(value).to_have_text("Nothing yet.")
    expect(section).to_contain_text("Never written.")

    # The model remembers through its tool; Show reads it back.
    answer = api.data(
        "POST",
        f"/agents/{AGENT}/text",
        {"input": "remember that I prefer metric units in Paris", "options": {"userId": user}},
    )
    assert answer["text"] == "Noted: Paris, metric.", answer
    section.get_by_role("button", name="Show").click()
    expect(value).to_contain_text('"city": "Paris"')
    expect(value).to_contain_text('"units": "metric"')
    expect(section).to_contain_text("Updated")
    screenshots(page, "console-working-memory.png", full_page=True)

    # Saved from the editor, seen by the API and by the model.
    section.get_by_label("New value (JSON)").fill('{"city": "Oslo", "units": "imperial"}')
    section.get_by_role("button", name="Save").click()
    expect(section.get_by_role("status")).to_have_text("Saved.")
    expect(value).to_contain_text('"city": "Oslo"')
    kept = api.data("GET", f"/agents/{AGENT}/memory/working?userId={user}")
    assert kept["value"] == {"city": "Oslo", "units": "imperial"}, kept
    answer = api.data(
        "POST", f"/agents/{AGENT}/text", {"input": "what do you know about me", "options": {"userId": user}}
    )
    assert answer["text"] == "You prefer imperial units in Oslo.", answer

    # A value the schema refuses: the server's message, nothing changed.
    page.watch.expect(400, "/memory/working")
    section.get_by_label("New value (JSON)").fill('{"units": "kelvin"}')
    section.get_by_role("button", name="Save").click()
    expect(section.get_by_role("alert")).to_contain_text("does not match its schema")
    expect(value).to_contain_text('"city": "Oslo"')
    kept = api.data("GET", f"/agents/{AGENT}/memory/working?userId={user}")
    assert kept["value"] == {"city": "Oslo", "units": "imperial"}, kept


def test_the_chat_remembers_and_the_section_shows_it(page, base):
    page.goto(f"{base}/console/agents/{AGENT}")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    city = f"Town{new_id('c')[-6:]}"
    message = page.get_by_role("textbox", name="Message")
    message.fill(f"Remember that I prefer imperial units in {city}")
    message.press("Enter")
    log = page.get_by_role("log", name="Conversation")
    expect(log.get_by_role("article", name="Assistant").last).to_contain_text(f"Noted: {city}, imperial.")
    section = memory_section(page)
    section.get_by_role("button", name="Show").click()
    expect(section.get_by_label("Working memory value")).to_contain_text(f'"city": "{city}"')


def test_with_jwt_the_section_shows_the_signed_in_user_s_memory_only(page, jwt_base, jwt_api, valid_token):
    jwt_api.data("PUT", f"/agents/{AGENT}/memory/working", {"value": {"city": "Lima", "units": "metric"}})
    page.goto(f"{jwt_base}/console/agents/{AGENT}")
    page.get_by_label("Access token").fill(valid_token)
    page.get_by_role("button", name="Sign in").click()
    section = memory_section(page)
    expect(section.get_by_label("User id")).to_have_value("")
    expect(section.get_by_label("Working memory value")).to_contain_text('"city": "Lima"')
    # Another user's memory is refused, whatever the field says.
    page.watch.expect(403, "/memory/working")
    section.get_by_label("User id").fill("someone-else")
    section.get_by_role("button", name="Show").click()
    expect(section.get_by_role("alert")).to_contain_text("Forbidden")
