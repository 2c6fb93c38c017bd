"""agentry's /mcp with the official MCP Python SDK as the client (Streamable HTTP).

Run by tests/mcp.rs against real servers: AGENTRY_MCP_URL (no authentication),
AGENTRY_MCP_JWT_URL (the JWT provider on) with AGENTRY_MCP_TOKEN (a valid token there).
"""

import asyncio
import json
import os

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.tool_name_validation import validate_tool_name


async def with_session(url, body, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                init = await session.initialize()
                assert init.server_info.name == "agentry"
                return await body(session)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_lists_tools_with_their_schemas():
    async def body(s):
        return {t.name: t for t in (await s.list_tools()).tools}

    tools = run(with_session(os.environ["AGENTRY_MCP_URL"], body))
    for name in ["get_weather", "calculate", "ask_assistant", "ask_writer", "run_word-count",
                 "run_expense-approval", "run_order-fulfillment"]:
        assert name in tools, sorted(tools)
    assert tools["calculate"].input_schema["required"] == ["expression"]
    assert tools["calculate"].input_schema["properties"]["expression"]["type"] == "string"
    assert tools["ask_assistant"].input_schema["required"] == ["input"]
    assert set(tools["ask_assistant"].input_schema["properties"]) == {"input", "conversationId"}
    word_count = tools["run_word-count"].input_schema
    assert word_count["properties"]["text"]["type"] == "string"
    expense = tools["run_expense-approval"].input_schema
    assert set(expense["required"]) == {"employeeId", "amount", "category"}
    assert "expense" in tools["run_expense-approval"].description.lower()
    # Every name is a valid MCP tool name, and no agent's internal run workflow is offered.
    for name in tools:
        assert validate_tool_name(name).is_valid, name
        assert not name.startswith("run_agent"), name


def test_an_unknown_tool_is_invalid_params_and_the_session_lives_on():
    async def body(s):
        errors = []
        for name in ["run_agent:assistant", "no_such_tool"]:
            with pytest.raises(MCPError) as refused:
                await s.call_tool(name, {"input": "hi"})
            errors.append(refused.value.error)
        after = await s.call_tool("calculate", {"expression": "1+1"})
        return errors, after

    errors, after = run(with_session(os.environ["AGENTRY_MCP_URL"], body))
    for error in errors:
        assert error.code == -32602, error
        assert "Unknown tool" in error.message, error
    assert not after.is_error and json.loads(after.content[0].text)["result"] == 2


def test_calls_a_tool_an_agent_and_a_workflow():
    async def body(s):
        calc = await s.call_tool("calculate", {"expression": "2*(3+4)"})
        ask = await s.call_tool("ask_assistant", {"input": "What is the weather in Paris?"})
        words = await s.call_tool("run_word-count", {"text": "one two three"})
        waiting = await s.call_tool(
            "run_expense-approval", {"employeeId": "e1", "amount": 5000, "category": "travel"})
        return calc, ask, words, waiting

    calc, ask, words, waiting = run(with_session(os.environ["AGENTRY_MCP_URL"], body))
    assert not calc.is_error
    assert json.loads(calc.content[0].text)["result"] == 14
    assert not ask.is_error
    assert "21" in ask.content[0].text and "sunny" in ask.content[0].text, ask.content[0].text
    assert not words.is_error
    assert words.structured_content["status"] == "completed"
    assert words.structured_content["result"] == {"words": 3}
    assert not waiting.is_error
    suspended = waiting.structured_content
    assert suspended["status"] == "suspended"
    assert suspended["suspension"]["reason"] == "Manager approval required for amounts over 1000"
    assert suspended["suspension"]["suspendData"] == {"employeeId": "e1", "amount": 5000}
    assert suspended["resume"]["resumeSchema"]["required"] == ["approved", "managerId"]
    assert suspended["executionId"] in suspended["resume"]["path"]


def test_bad_arguments_are_tool_errors_and_the_session_lives_on():
    async def body(s):
        bad = await s.call_tool("calculate", {"expression": 5})
        broken = await s.call_tool("calculate", {"expression": "1/0"})
        invalid = await s.call_tool("run_word-count", {"text": 42})
        unknown_input = await s.call_tool("ask_writer", {})
        after = await s.call_tool("calculate", {"expression": "1+1"})
        return bad, broken, invalid, unknown_input, after

    bad, broken, invalid, missing, after = run(with_session(os.environ["AGENTRY_MCP_URL"], body))
    assert bad.is_error and "expression" in bad.content[0].text, bad.content[0].text
    assert broken.is_error, broken.content[0].text
    assert invalid.is_error and "Input validation failed" in invalid.content[0].text
    assert missing.is_error and "input is required" in missing.content[0].text
    assert not after.is_error and json.loads(after.content[0].text)["result"] == 2


def test_with_jwt_refused_without_a_token_and_working_with_one():
    url = os.environ["AGENTRY_MCP_JWT_URL"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    refused = httpx2.post(url, json=init,
                          headers={"Accept": "application/json, text/event-stream"})
    assert refused.status_code == 401
    assert refused.json()["error"] == "Authentication required"

    with pytest.raises(BaseException):
        run(with_session(url, lambda s: s.list_tools()))

    token = os.environ["AGENTRY_MCP_TOKEN"]

    async def body(s):
        answer = await s.call_tool("ask_assistant", {"input": "calculate 6*7"})
        run_ = await s.call_tool("run_word-count", {"text": "as someone"})
        return answer, run_

    answer, started = run(with_session(url, body, token))
    assert not answer.is_error and "42" in answer.content[0].text, answer.content[0].text
    # The workflow saw the authenticated user, as on the HTTP routes: it is theirs.
    execution = started.structured_content["executionId"]
    base = url.rsplit("/mcp", 1)[0]
    state = httpx2.get(f"{base}/executions/{execution}",
                       headers={"Authorization": f"Bearer {token}"}).json()["data"]
    assert state["context"]["userId"] == "mcp-user", state["context"]
    assert state["context"]["user"]["id"] == "mcp-user", state["context"]
