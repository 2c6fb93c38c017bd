"""agentry's A2A server with the official Python SDK (`a2a-sdk` 1.3, A2A protocol 1.0) as the
client, over its JSON-RPC binding.

Run by tests/a2a.rs against real servers:
- AGENTRY_A2A_URL: no authentication; its agents are the examples and `slow` (a weather tool
  that takes 4 s);
- AGENTRY_A2A_JWT_URL: the JWT provider on (AGENTRY_A2A_TOKEN is valid there);
- AGENTRY_A2A_STRICT_URL: the JWT provider on in strict mode, AGENTRY_A2A_TOKEN_ALICE and
  AGENTRY_A2A_TOKEN_BOB two users' tokens there.
"""

import asyncio
import os
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

OPEN = os.environ["AGENTRY_A2A_URL"]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=90))


def agent_url(base, agent):
    return f"{base}/a2a/{agent}"


def user_msg(text=None, data=None, task_id=None, context_id=None):
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        value = Value()
        value.struct_value.update(data)
        parts.append(Part(data=value))
    msg = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)
    if task_id:
        msg.task_id = task_id
    if context_id:
        msg.context_id = context_id
    return msg


async def clients(url, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=60)
    card = await A2ACardResolver(http, url).get_agent_card()
    unary = await create_client(card, client_config=ClientConfig(httpx_client=http, streaming=False))
    streaming = await create_client(card, client_config=ClientConfig(httpx_client=http))
    return card, unary, streaming


async def send(client, msg, configuration=None):
    """The task `SendMessage` answers (a unary client yields one response)."""
    request = SendMessageRequest(message=msg)
    if configuration is not None:
        request.configuration.CopyFrom(configuration)
    out = [ev async for ev in client.send_message(request)]
    assert len(out) == 1, out
    assert out[0].WhichOneof("payload") == "task", out[0]
    return out[0].task


def text_of(task):
    return " ".join(p.text for a in task.artifacts for p in a.parts if p.text)


def test_every_agent_has_a_card():
    async def body():
        async with httpx.AsyncClient(timeout=30) as http:
            for agent in ["assistant", "operator", "writer"]:
                card = await A2ACardResolver(http, agent_url(OPEN, agent)).get_agent_card()
                assert card.name
                assert card.capabilities.streaming
                iface = card.supported_interfaces[0]
                assert iface.protocol_binding == "JSONRPC"
                assert iface.protocol_version == "1.0"
                assert iface.url.endswith(f"/a2a/{agent}")
            card = await A2ACardResolver(http, agent_url(OPEN, "assistant")).get_agent_card()
            assert {s.id for s in card.skills} >= {"get_weather", "calculate"}
            # No provider: no security scheme.
            assert not card.security_schemes
            missing = await http.get(f"{OPEN}/a2a/nobody/.well-known/agent-card.json")
            assert missing.status_code == 404
            assert missing.json()["code"] == "agent_not_found"

    run(body())


def test_a_message_is_a_task_that_completes_with_the_weather():
    async def body():
        _, unary, _ = await clients(agent_url(OPEN, "assistant"))
        task = await send(unary, user_msg("What is the weather in Paris?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert "Paris" in text_of(task) and "°C" in text_of(task), text_of(task)
        roles = [m.role for m in task.history]
        assert roles[0] == Role.ROLE_USER and Role.ROLE_AGENT in roles
        # The task is the durable run: the same id on the HTTP API.
        async with httpx.AsyncClient() as http:
            run_state = (await http.get(f"{OPEN}/agents/assistant/runs/{task.id}")).json()
        assert run_state["data"]["status"] == "completed"
        assert run_state["data"]["conversationId"] == task.context_id
        got = await unary.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED
        assert len(got.history) == 1

    run(body())


def test_a_stream_shows_the_task_then_its_progress_then_its_end():
    async def body():
        _, _, streaming = await clients(agent_url(OPEN, "assistant"))
        events = [ev async for ev in streaming.send_message(
            SendMessageRequest(message=user_msg("What is the weather in Rome?")))]
        kinds = [ev.WhichOneof("payload") for ev in events]
        assert kinds[0] == "task", kinds
        assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
        assert kinds[-2:] == ["artifact_update", "status_update"], kinds
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        progress = [MessageToDict(ev.status_update.status.message) for ev in events
                    if ev.WhichOneof("payload") == "status_update"
                    and ev.status_update.status.state == TaskState.TASK_STATE_WORKING]
        assert any("toolCall" in p.get("data", {}) for m in progress for p in m["parts"]), progress
        assert "Rome" in events[-2].artifact_update.artifact.parts[0].text
        # One task id throughout.
        ids = {events[0].task.id} | {ev.status_update.task_id for ev in events[1:]
                                     if ev.WhichOneof("payload") == "status_update"}
        assert len(ids) == 1

    run(body())


def test_a_slow_run_is_cancelled():
    async def body():
        _, unary, _ = await clients(agent_url(OPEN, "slow"))
        task = await send(unary, user_msg("What is the weather in Oslo?"),
                          SendMessageConfiguration(return_immediately=True))
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        cancelled = await unary.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        await asyncio.sleep(5)
        again = await unary.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(Exception) as refused:
            await unary.cancel_task(CancelTaskRequest(id=task.id))
        assert "cancel" in str(refused.value).lower(), refused.value

    run(body())


def test_a_dropped_stream_is_resubscribed():
    async def body():
        _, _, streaming = await clients(agent_url(OPEN, "slow"))
        stream = streaming.send_message(SendMessageRequest(message=user_msg("What is the weather in Lima?")))
        first = await stream.__anext__()
        task_id = first.task.id
        await stream.aclose()  # the connection drops; the run goes on
        events = [ev async for ev in streaming.subscribe(SubscribeToTaskRequest(id=task_id))]
        assert events[0].WhichOneof("payload") == "task"
        assert events[0].task.id == task_id
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert "Lima" in events[-2].artifact_update.artifact.parts[0].text

    run(body())


def test_a_refund_over_100_waits_for_input_then_completes_after_the_approval():
    async def body():
        _, unary, streaming = await clients(agent_url(OPEN, "operator"))
        events = [ev async for ev in streaming.send_message(SendMessageRequest(
            message=user_msg("refund order o-77 250 damaged box")))]
        last = events[-1].status_update
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, events
        asked = MessageToDict(last.status.message)
        pending = next(p["data"] for p in asked["parts"] if "data" in p)["pendingApprovals"]
        assert pending[0]["toolName"] == "issue_refund"
        task = await send(unary, user_msg(data={"approved": True}, task_id=last.task_id,
                                          context_id=last.context_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert "250" in text_of(task)
        # A task that ended takes no more messages.
        with pytest.raises(Exception):
            await send(unary, user_msg(data={"approved": True}, task_id=task.id))

    run(body())


def test_a_token_is_required_when_a_provider_is_on():
    async def body():
        url = agent_url(os.environ["AGENTRY_A2A_JWT_URL"], "assistant")
        # The card is public, and names the Bearer scheme.
        async with httpx.AsyncClient(timeout=30) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
        scheme = card.security_schemes["bearer"].http_auth_security_scheme
        assert scheme.scheme == "Bearer" and scheme.bearer_format == "JWT"
        _, anonymous, _ = await clients(url)
        with pytest.raises(Exception) as refused:
            await send(anonymous, user_msg("What is the weather in Paris?"))
        assert "401" in str(refused.value), refused.value
        _, unary, _ = await clients(url, os.environ["AGENTRY_A2A_TOKEN"])
        task = await send(unary, user_msg("What is the weather in Paris?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

    run(body())


def test_another_users_task_is_not_found_in_strict_mode():
    async def body():
        url = agent_url(os.environ["AGENTRY_A2A_STRICT_URL"], "assistant")
        _, alice, _ = await clients(url, os.environ["AGENTRY_A2A_TOKEN_ALICE"])
        _, bob, _ = await clients(url, os.environ["AGENTRY_A2A_TOKEN_BOB"])
        task = await send(alice, user_msg("What is the weather in Paris?"))
        assert (await alice.get_task(GetTaskRequest(id=task.id))).id == task.id
        with pytest.raises(TaskNotFoundError) as missing:
            await bob.get_task(GetTaskRequest(id=task.id))
        assert missing.value.data == {"code": "run_not_found"}, missing.value.data
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task.id))

    run(body())


def test_refusals_are_json_rpc_errors_with_the_table_code():
    async def body():
        async with httpx.AsyncClient(timeout=30) as http:
            url = agent_url(OPEN, "assistant")

            async def rpc(payload):
                r = await http.post(url, json=payload)
                assert r.status_code == 200, r.text
                return r.json()

            bad = await rpc({"jsonrpc": "2.0", "id": 7, "method": "Nope", "params": {}})
            assert bad["id"] == 7 and bad["error"]["code"] == -32601
            bad = await rpc({"jsonrpc": "2.0", "id": "x", "method": "SendMessage",
                             "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{}]}}})
            assert bad["error"]["code"] == -32602
            assert bad["error"]["data"][0]["metadata"]["code"] == "invalid_request"
            bad = await rpc({"jsonrpc": "2.0", "id": "y", "method": "GetTask", "params": {"id": "nope"}})
            assert bad["error"]["code"] == -32001
            assert bad["error"]["data"][0]["metadata"]["code"] == "run_not_found"
            bad = await rpc({"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
            assert bad["error"]["code"] == -32600
            garbage = await http.post(url, content=b"{not json", headers={"content-type": "application/json"})
            assert garbage.json()["error"]["code"] == -32700

    run(body())


def test_list_tasks_pages_a_contexts_tasks_newest_first_with_its_filters():
    async def body():
        _, unary, _ = await clients(agent_url(OPEN, "assistant"))
        context = f"list-{uuid.uuid4()}"
        made = [await send(unary, user_msg(f"Task {i} of the list", context_id=context))
                for i in range(3)]
        assert all(t.status.state == TaskState.TASK_STATE_COMPLETED for t in made)
        first = await unary.list_tasks(ListTasksRequest(context_id=context, page_size=2))
        assert first.total_size == 3 and first.page_size == 2 and len(first.tasks) == 2
        assert first.next_page_token
        second = await unary.list_tasks(ListTasksRequest(
            context_id=context, page_size=2, page_token=first.next_page_token))
        assert second.total_size == 3 and second.page_size == 1 and second.next_page_token == ""
        listed = [t.id for t in first.tasks] + [t.id for t in second.tasks]
        # Every task once, newest status first (the last one made first).
        assert listed == [t.id for t in reversed(made)], listed
        stamps = [t.status.timestamp.ToDatetime() for t in list(first.tasks) + list(second.tasks)]
        assert stamps == sorted(stamps, reverse=True), stamps
        # Artifacts only when asked; the history to the length asked.
        assert all(len(t.artifacts) == 0 for t in first.tasks)
        full = await unary.list_tasks(ListTasksRequest(
            context_id=context, include_artifacts=True, history_length=1))
        assert all("of the list" in text_of(t) for t in full.tasks), full
        assert all(len(t.history) == 1 for t in full.tasks), full
        none = await unary.list_tasks(ListTasksRequest(context_id=context, history_length=0))
        assert all(len(t.history) == 0 for t in none.tasks)
        # The filters: a status, a time, another context.
        done = await unary.list_tasks(ListTasksRequest(
            context_id=context, status=TaskState.TASK_STATE_COMPLETED))
        assert done.total_size == 3
        working = await unary.list_tasks(ListTasksRequest(
            context_id=context, status=TaskState.TASK_STATE_WORKING))
        assert working.total_size == 0 and list(working.tasks) == []
        later = Timestamp()
        later.FromDatetime(made[-1].status.timestamp.ToDatetime())
        recent = await unary.list_tasks(ListTasksRequest(
            context_id=context, status_timestamp_after=later))
        assert [t.id for t in recent.tasks] == [made[-1].id], recent
        other = await unary.list_tasks(ListTasksRequest(context_id=f"none-{uuid.uuid4()}"))
        assert other.total_size == 0 and other.next_page_token == ""
        # Without a filter: this agent's tasks only (the slow agent's are not here).
        everything = await unary.list_tasks(ListTasksRequest(page_size=100))
        assert {t.id for t in made} <= {t.id for t in everything.tasks}

    run(body())


def test_list_tasks_finds_a_working_task_by_its_state():
    async def body():
        _, unary, _ = await clients(agent_url(OPEN, "slow"))
        context = f"working-{uuid.uuid4()}"
        task = await send(unary, user_msg("What is the weather in Bern?", context_id=context),
                          SendMessageConfiguration(return_immediately=True))
        await asyncio.sleep(0.5)
        working = await unary.list_tasks(ListTasksRequest(
            context_id=context, status=TaskState.TASK_STATE_WORKING))
        assert [t.id for t in working.tasks] == [task.id], working
        done = await unary.list_tasks(ListTasksRequest(
            context_id=context, status=TaskState.TASK_STATE_COMPLETED))
        assert list(done.tasks) == []
        await unary.cancel_task(CancelTaskRequest(id=task.id))

    run(body())


def test_list_tasks_shows_only_the_callers_tasks_in_strict_mode():
    async def body():
        url = agent_url(os.environ["AGENTRY_A2A_STRICT_URL"], "assistant")
        _, alice, _ = await clients(url, os.environ["AGENTRY_A2A_TOKEN_ALICE"])
        _, bob, _ = await clients(url, os.environ["AGENTRY_A2A_TOKEN_BOB"])
        context = f"shared-{uuid.uuid4()}"
        hers = await send(alice, user_msg("What is the weather in Paris?", context_id=context))
        his = await send(bob, user_msg("What is the weather in Rome?", context_id=context))
        for client, own in ((alice, hers), (bob, his)):
            listed = await client.list_tasks(ListTasksRequest(context_id=context))
            assert [t.id for t in listed.tasks] == [own.id], listed
            assert listed.total_size == 1
            everything = await client.list_tasks(ListTasksRequest(page_size=100))
            other = his if own is hers else hers
            assert other.id not in {t.id for t in everything.tasks}

    run(body())


def test_list_and_history_refusals_are_invalid_params_and_the_extended_card_is_unsupported():
    async def body():
        url = agent_url(OPEN, "assistant")
        async with httpx.AsyncClient(timeout=30) as http:

            async def error_of(method, params):
                r = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                               "params": params})
                assert r.status_code == 200, r.text
                return r.json()["error"]

            for params in [{"pageSize": 0}, {"pageSize": 101}, {"pageSize": -1},
                           {"pageToken": "invalid-token-xyz"}, {"status": "TASK_STATE_NOPE"},
                           {"statusTimestampAfter": "-1"}, {"historyLength": -1}]:
                error = await error_of("ListTasks", params)
                assert error["code"] == -32602, (params, error)
                assert error["data"][0]["metadata"]["code"] == "invalid_request", error
            context = f"refused-{uuid.uuid4()}"
            send_params = {"message": {"messageId": "m1", "role": "ROLE_USER",
                                       "parts": [{"text": "hello"}], "contextId": context},
                           "configuration": {"historyLength": -1}}
            assert (await error_of("SendMessage", send_params))["code"] == -32602
            # The refused message started nothing.
            listed = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ListTasks",
                                                "params": {"contextId": context}})
            assert listed.json()["result"] == {"tasks": [], "nextPageToken": "", "pageSize": 0,
                                               "totalSize": 0}, listed.text
            extended = await error_of("GetExtendedAgentCard", {})
            assert extended["code"] == -32004, extended
            assert extended["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
        _, unary, _ = await clients(url)
        task = await send(unary, user_msg("What is the weather in Paris?"))
        with pytest.raises(InvalidParamsError):
            await unary.get_task(GetTaskRequest(id=task.id, history_length=-1))
        with pytest.raises(InvalidParamsError):
            await unary.list_tasks(ListTasksRequest(page_size=500))

    run(body())
