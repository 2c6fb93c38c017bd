// A chat with an agent over `POST /agents/{id}/chat`, as the AI SDK's `useChat` uses it: the
// last user message as a UIMessage (`{id, role: "user", parts: [{type: "text", text}]}`) with
// `options.conversationId` (so the agent's memory keeps the conversation between turns) and
// `options.userId`; the answer is the UI message stream (SSE; protocol v1): `start`,
// `text-start` / `text-delta` / `text-end`, `tool-input-start` / `tool-input-available`,
// `tool-output-available` / `tool-output-error`, `finish` or `error`, then `[DONE]`.
//
// A durable run (an agent with a tool that needs a person's approval) can stop to wait: after
// that call's `tool-input-available` the stream carries `tool-approval-request` (`approvalId`)
// and ends. The call then shows an approval prompt (the tool, its arguments, Approve / Deny with
// a reason). The answer goes as `useChat` sends it: POST /chat again with the assistant message
// (its id is the run's) whose tool part is `approval-responded`; the server continues the run
// and streams the rest of that same message (`tool-output-available`, or `tool-output-denied`,
// then the text), appended to it here.
//
// The transcript shown is kept in sessionStorage with the conversation id, per agent, so that
// a reload shows the same conversation; "New conversation" starts a fresh one. After a reload
// the chat resumes the conversation's active run (`GET /agents/{id}/chat/{conversationId}/stream`,
// 204 when there is none: the run's message from its start, replacing the one kept), so a prompt
// still waiting shows again. A kept prompt whose run waits no more (answered elsewhere) is read
// again from its run (`GET /agents/{id}/runs/{runId}/stream?format=ui`).

import { request, seg } from "./api.js";
import { h, json, randomId, replace, setText } from "./dom.js";
import { approvalErrorText, approvalForm, runUrl } from "./runs.js";
import { readEvents } from "./sse.js";

const MAX_KEPT = 100;
const SSE = { Accept: "text/event-stream" };

function storageKey(agentId) {
  return `agentry.console.chat.${agentId}`;
}

function load(agentId) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(storageKey(agentId)));
    if (saved && typeof saved.conversationId === "string" && Array.isArray(saved.messages)) return saved;
  } catch {
    // Nothing usable kept: start afresh.
  }
  return { conversationId: randomId("console"), messages: [] };
}

function save(agentId, session) {
  session.messages = session.messages.slice(-MAX_KEPT);
  // An answer not sent yet (`answer` on a tool part) is not kept: after a reload it is asked again.
  const unsent = (p) => {
    if (!p.answer) return p;
    const { answer: _, ...rest } = p;
    return rest;
  };
  const messages = session.messages.map((m) => (m.role === "assistant" ? { ...m, parts: m.parts.map(unsent) } : m));
  sessionStorage.setItem(storageKey(agentId), JSON.stringify({ ...session, messages }));
}

const newAssistant = () => ({ id: null, role: "assistant", parts: [], metadata: null, error: null });

/** Whether a message has a tool call waiting for an approval (asked, not answered here). */
const waiting = (message) => message.parts.some((p) => p.type === "tool" && p.state === "approval-requested");

/**
 * The chat of `agent` (its detail): the conversation line, the log and the message form.
 * `signal` stops a stream in flight when the view goes away.
 */
export function chat(agent, signal) {
  let session = load(agent.id);
  save(agent.id, session);
  const chatPath = `/agents/${seg(agent.id)}/chat`;
  let controller = null; // the stream in flight: a turn, an answer's continuation, a resume
  let idleWaiters = [];
  const views = new Map(); // message -> its view

  const conversation = h("code", {}, session.conversationId);
  const log = h("div", { class: "chat-log", role: "log", "aria-label": "Conversation", tabindex: "0" });
  const input = h("textarea", {
    id: "chat-message",
    name: "message",
    rows: 2,
    required: true,
    placeholder: agent.tools.includes("get_weather") ? "What is the weather in Paris?" : "Write a message",
    "aria-describedby": "chat-hint",
  });
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const stop = h("button", { type: "button", disabled: true }, "Stop");
  const alert = h("p", { class: "alert", role: "alert", dataset: { testid: "chat-alert" } });
  const form = h(
    "form",
    { class: "chat-form", "aria-label": "Chat input" },
    h(
      "div",
      { class: "field" },
      h("label", { for: "chat-message" }, "Message"),
      input,
      h("span", { class: "hint", id: "chat-hint" }, "Enter sends; Shift+Enter starts a new line."),
    ),
    h("div", { class: "buttons" }, send, stop),
  );
  const newConversation = h("button", { type: "button" }, "New conversation");

  const atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 24;
  const follow = (wasAtBottom) => {
    if (wasAtBottom) log.scrollTop = log.scrollHeight;
  };

  // ---- Messages and their views ----

  function show(message) {
    const view = messageView(message, {
      agentId: agent.id,
      onAnswer: (part, approved, reason) => answer(message, part, approved, reason),
    });
    views.set(message, view);
    return view;
  }

  function drawAll() {
    replace(log);
    views.clear();
    if (!session.messages.length) {
      log.append(h("p", { class: "muted empty" }, `Say something to ${agent.name}.`));
    }
    for (const m of session.messages) log.append(show(m).el);
    log.scrollTop = log.scrollHeight;
  }

  /** Puts `fresh` in the place of `old` (the same run's message, read again). */
  function replaceMessage(old, fresh) {
    const i = session.messages.indexOf(old);
    if (i >= 0) session.messages[i] = fresh;
    else session.messages.push(fresh);
    const view = show(fresh);
    const oldView = views.get(old);
    if (oldView && oldView.el.isConnected) oldView.el.replaceWith(view.el);
    else log.append(view.el);
    views.delete(old);
    return view;
  }

  /** Shows `fresh` as the message `id` of a run: in the place of one kept, else at the end. */
  function placeMessage(fresh, id) {
    const old = session.messages.find((m) => m !== fresh && m.role === "assistant" && m.id === id);
    if (old) return replaceMessage(old, fresh);
    log.querySelector(".empty")?.remove();
    session.messages.push(fresh);
    const view = show(fresh);
    log.append(view.el);
    log.scrollTop = log.scrollHeight;
    return view;
  }

  // ---- One stream at a time ----

  function begin() {
    controller = new AbortController();
    send.disabled = true;
    stop.disabled = false;
    return controller;
  }

  function end(mine) {
    if (controller !== mine) return;
    controller = null;
    send.disabled = false;
    stop.disabled = true;
    save(agent.id, session);
    idleWaiters.splice(0).forEach((resolve) => resolve());
  }

  async function idle() {
    while (controller) await new Promise((resolve) => idleWaiters.push(resolve));
  }

  /**
   * Reads a UI message stream (`response`) into `message`. `onStart(messageId)` runs at the
   * `start` chunk, before it is applied (a resume places its message then).
   */
  async function readInto(response, message, mine, onStart) {
    // A durable run names itself (its id is also the message's).
    const runId = response.headers.get("x-run-id");
    if (runId) message.runId = runId;
    await readEvents(
      response.body,
      (msg) => {
        if (msg.data === "[DONE]") return;
        let chunk;
        try {
          chunk = JSON.parse(msg.data);
        } catch {
          return;
        }
        if (chunk.type === "start" && onStart) onStart(chunk.messageId);
        const wasAtBottom = atBottom();
        apply(message, chunk);
        views.get(message)?.update();
        follow(wasAtBottom);
        if (chunk.type === "start" || chunk.type === "tool-approval-request" || chunk.type === "finish") {
          save(agent.id, session);
        }
      },
      mine.signal,
    );
  }

  function failed(message, e) {
    if (e.name === "AbortError") {
      if (signal.aborted) return;
      message.error = "Stopped.";
    } else {
      message.error = e.message;
      alert.textContent = e.message;
    }
    views.get(message)?.update();
  }

  // ---- A turn ----

  newConversation.addEventListener("click", () => {
    controller?.abort();
    session = { conversationId: randomId("console"), messages: [] };
    save(agent.id, session);
    setText(conversation, session.conversationId);
    alert.textContent = "";
    drawAll();
    input.focus();
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  stop.addEventListener("click", () => controller?.abort());
  signal.addEventListener("abort", () => controller?.abort());

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || controller) return;
    alert.textContent = "";
    log.querySelector(".empty")?.remove();
    const mine = begin();

    const userMessage = { id: randomId("msg"), role: "user", parts: [{ type: "text", text }] };
    session.messages.push(userMessage);
    log.append(show(userMessage).el);
    save(agent.id, session);
    const assistant = newAssistant();
    session.messages.push(assistant);
    const view = show(assistant);
    view.setPending(true);
    log.append(view.el);
    log.scrollTop = log.scrollHeight;
    input.value = "";

    const body = {
      input: [userMessage],
      options: { conversationId: session.conversationId, userId: "console" },
    };
    try {
      const response = await request(chatPath, { method: "POST", body, signal: mine.signal, headers: SSE });
      await readInto(response, assistant, mine);
    } catch (e) {
      failed(assistant, e);
    } finally {
      view.setPending(false);
      end(mine);
      if (!signal.aborted && !waiting(assistant)) input.focus();
    }
  });

  // ---- Approvals ----

  /**
   * The answer to a tool call's approval prompt. Once every call of the message that waits is
   * answered, POST /chat continues the run with them; resolves once the server took them (the
   * rest of the run streams into the message), rejects with its refusal.
   */
  async function answer(message, part, approved, reason) {
    part.answer = { approved, reason };
    if (message.parts.some((p) => p.type === "tool" && p.state === "approval-requested" && !p.answer)) {
      views.get(message)?.update();
      return;
    }
    await idle();
    if (!views.has(message)) {
      // Read again meanwhile (a resume after a reload): answer the call in the message shown.
      const current = session.messages.find((m) => m.role === "assistant" && m.id === message.id);
      const same = current && current.parts.find((p) => p.type === "tool" && p.toolCallId === part.toolCallId);
      if (!same || same.state !== "approval-requested") return;
      return answer(current, same, approved, reason);
    }
    const answered = message.parts.filter((p) => p.type === "tool" && p.state === "approval-requested" && p.answer);
    const approvalOf = (p) => {
      const a = { id: p.approval.id, approved: p.answer.approved };
      if (p.answer.reason) a.reason = p.answer.reason;
      return a;
    };
    const body = {
      messages: [
        {
          id: message.id,
          role: "assistant",
          parts: answered.map((p) => ({
            type: `tool-${p.toolName}`,
            toolCallId: p.toolCallId,
            state: "approval-responded",
            input: p.input,
            approval: approvalOf(p),
          })),
        },
      ],
      options: { conversationId: session.conversationId, userId: "console" },
    };
    alert.textContent = "";
    const mine = begin();
    let response;
    try {
      response = await request(chatPath, { method: "POST", body, signal: mine.signal, headers: SSE });
    } catch (e) {
      for (const p of answered) delete p.answer;
      end(mine);
      views.get(message)?.update();
      if (e.code === "approval_not_pending" || e.code === "approval_not_found") {
        // Answered elsewhere (or expired, or the run ended): say so, and show what the run did.
        alert.textContent = approvalErrorText(e);
        reloadFromRun(message);
      }
      throw e;
    }
    for (const p of answered) {
      p.approval = approvalOf(p);
      p.state = "approval-responded";
      delete p.answer;
    }
    message.error = null;
    const view = views.get(message);
    view?.update();
    view?.setPending(true);
    save(agent.id, session);
    // The rest of the run, into the same message.
    (async () => {
      try {
        await readInto(response, message, mine);
      } catch (e) {
        failed(message, e);
      } finally {
        views.get(message)?.setPending(false);
        end(mine);
      }
    })();
  }

  /** Reads a run's message again from its start (it replaces the one shown). */
  async function reloadFromRun(message) {
    await idle();
    if (signal.aborted || !views.has(message)) return;
    const mine = begin();
    const fresh = newAssistant();
    try {
      const response = await request(`/agents/${seg(agent.id)}/runs/${seg(message.id)}/stream?format=ui`, {
        signal: mine.signal,
        headers: SSE,
      });
      replaceMessage(message, fresh).setPending(true);
      await readInto(response, fresh, mine);
    } catch (e) {
      if (e.name !== "AbortError" && !signal.aborted) alert.textContent = `Could not read the run again: ${e.message}`;
    } finally {
      views.get(fresh)?.setPending(false);
      end(mine);
    }
  }

  /**
   * After a reload: the conversation's active run, if any, from its start (a prompt still
   * waiting shows again); then any kept prompt whose run no longer waits is read again.
   */
  async function resume() {
    const mine = begin();
    const fresh = newAssistant();
    let active = false;
    try {
      const path = `/agents/${seg(agent.id)}/chat/${seg(session.conversationId)}/stream`;
      const response = await request(path, { signal: mine.signal, headers: SSE });
      if (response.status !== 204) {
        active = true;
        await readInto(response, fresh, mine, (id) => {
          if (!views.has(fresh)) placeMessage(fresh, id).setPending(true);
        });
      }
    } catch (e) {
      if (views.has(fresh)) failed(fresh, e);
      else if (e.name !== "AbortError" && !signal.aborted) alert.textContent = `Could not resume the conversation: ${e.message}`;
    } finally {
      views.get(fresh)?.setPending(false);
      end(mine);
    }
    if (signal.aborted) return;
    for (const m of session.messages.slice()) {
      if (m.role !== "assistant" || !m.id || (active && m.id === fresh.id)) continue;
      // A prompt kept from before, or a run's message cut short (stopped, or the page left).
      const stale =
        m.parts.some((p) => p.type === "tool" && (p.state === "approval-requested" || p.state === "approval-responded")) ||
        (m.runId === m.id && !m.metadata);
      if (stale) await reloadFromRun(m);
    }
  }

  drawAll();
  resume();
  return h(
    "section",
    { class: "chat", "aria-labelledby": "chat-title" },
    h(
      "div",
      { class: "page-head" },
      h("h2", { id: "chat-title" }, "Chat"),
      h("p", { class: "small muted" }, "Conversation ", conversation, " ", newConversation),
    ),
    log,
    form,
    alert,
  );
}

/** Applies one UI message stream chunk to the assistant message being built. */
function apply(message, chunk) {
  const tool = (id) => message.parts.find((p) => p.type === "tool" && p.toolCallId === id);
  switch (chunk.type) {
    case "start":
      message.id = chunk.messageId || message.id;
      break;
    case "text-start":
      message.parts.push({ type: "text", id: chunk.id, text: "" });
      break;
    case "text-delta": {
      // The last text part of that id: a continued run's text may reuse an id.
      let part = message.parts.findLast((p) => p.type === "text" && p.id === chunk.id);
      if (!part) {
        part = { type: "text", id: chunk.id, text: "" };
        message.parts.push(part);
      }
      part.text += chunk.delta;
      break;
    }
    case "tool-input-start":
      if (!tool(chunk.toolCallId)) {
        message.parts.push({ type: "tool", toolCallId: chunk.toolCallId, toolName: chunk.toolName, state: "input-streaming" });
      }
      break;
    case "tool-input-available": {
      let part = tool(chunk.toolCallId);
      if (!part) {
        part = { type: "tool", toolCallId: chunk.toolCallId, toolName: chunk.toolName };
        message.parts.push(part);
      }
      part.input = chunk.input;
      part.state = "input-available";
      break;
    }
    case "tool-approval-request": {
      const part = tool(chunk.toolCallId);
      if (part) {
        part.approval = { id: chunk.approvalId };
        part.state = "approval-requested";
      }
      break;
    }
    case "tool-output-available": {
      const part = tool(chunk.toolCallId);
      if (part) {
        part.output = chunk.output;
        part.state = "output-available";
      }
      break;
    }
    case "tool-output-error": {
      const part = tool(chunk.toolCallId);
      if (part) {
        part.errorText = chunk.errorText;
        part.state = "output-error";
      }
      break;
    }
    case "tool-output-denied": {
      const part = tool(chunk.toolCallId);
      if (part) part.state = "output-denied";
      break;
    }
    case "finish":
      message.metadata = chunk.messageMetadata || null;
      break;
    case "error":
      message.error = chunk.errorText || "The generation failed.";
      break;
    default:
      // start-step, finish-step, text-end and chunks of later protocol versions: nothing to show.
      break;
  }
}

function toolState(part) {
  switch (part.state) {
    case "input-streaming":
      return "calling…";
    case "input-available":
      return "running…";
    case "approval-requested":
      return part.answer ? "answered" : "waiting for approval";
    case "approval-responded":
      return part.approval && part.approval.approved ? "approved · running…" : "denied";
    case "output-available":
      return part.approval && part.approval.approved ? "approved · done" : "done";
    case "output-error":
      return "failed";
    case "output-denied":
      return "denied";
    default:
      return "";
  }
}

/**
 * The view of one message, updated in place as its parts grow: `{el, update(), setPending()}`.
 * Text parts are spans whose text is extended; tool parts are regions named after the tool, with
 * an approval prompt while one waits (`hooks.onAnswer(part, approved, reason)` answers it).
 */
function messageView(message, hooks) {
  const body = h("div", { class: "parts" });
  const note = h("span");
  const run = h("span");
  const footer = h("div", { class: "small muted msg-foot" }, note, run);
  const error = h("p", { class: "error", role: "alert" });
  const el = h(
    "article",
    { class: `msg ${message.role}`, "aria-label": message.role === "user" ? "You" : "Assistant" },
    h("div", { class: "who", "aria-hidden": "true" }, message.role === "user" ? "You" : "Assistant"),
    body,
    error,
    footer,
  );
  const partViews = [];

  function approvalPrompt(part) {
    const form = approvalForm({
      label: `Answer ${part.toolName}`,
      onAnswer: (approved, reason) => hooks.onAnswer(part, approved, reason),
    });
    return h(
      "div",
      { class: "approval-prompt", role: "group", "aria-label": `Approval of ${part.toolName}` },
      h("p", {}, h("strong", {}, "Approval needed. "), h("span", { class: "tool-name" }, part.toolName), " runs with the input above only once a person approves it."),
      form.el,
    );
  }

  function partView(part) {
    if (part.type === "text") {
      const span = h("div", { class: "text" });
      return { el: span, update: () => setText(span, part.text) };
    }
    const state = h("span", { class: "tool-state" });
    const inputPre = h("pre", { "aria-label": "Tool input" });
    const prompt = h("div");
    const output = h("div");
    const region = h(
      "section",
      { class: "tool", "aria-label": `Tool call: ${part.toolName}` },
      h("div", {}, "Tool ", h("span", { class: "tool-name" }, part.toolName), state),
      h("div", { class: "tool-label" }, "input"),
      inputPre,
      prompt,
      output,
    );
    let outputKey = null;
    let promptKey = null;
    return {
      el: region,
      update() {
        setText(state, toolState(part));
        setText(inputPre, part.input === undefined ? "…" : json(part.input));
        const pKey = part.state === "approval-requested" ? (part.answer ? "answered" : "ask") : part.state === "output-denied" ? "denied" : "";
        if (pKey !== promptKey) {
          promptKey = pKey;
          if (pKey === "ask") replace(prompt, approvalPrompt(part));
          else if (pKey === "answered") {
            replace(prompt, h("p", { class: "small muted" }, `Your answer (${part.answer.approved ? "approve" : "deny"}) goes with the other calls' answers.`));
          } else if (pKey === "denied") {
            const reason = part.approval && part.approval.reason;
            replace(prompt, h("p", { class: "small" }, reason ? `Denied: ${reason}` : "Denied."));
          } else replace(prompt);
        }
        const key = json([part.output, part.errorText]);
        if (key === outputKey) return;
        outputKey = key;
        if (part.state === "output-error") {
          replace(output, h("p", { class: "error" }, `Error: ${part.errorText}`));
        } else if (part.output !== undefined) {
          replace(output, h("div", { class: "tool-label" }, "result"), h("pre", { "aria-label": "Tool result" }, json(part.output)));
        }
      },
    };
  }

  function update() {
    message.parts.forEach((part, i) => {
      if (!partViews[i]) {
        partViews[i] = partView(part);
        body.append(partViews[i].el);
      }
      partViews[i].update();
    });
    setText(error, message.error || "");
    // A durable run's message: a link to its run's page.
    if (message.runId && hooks && !run.firstChild) {
      run.append(h("a", { href: runUrl(hooks.agentId, message.runId) }, "View the run"));
    }
    const m = message.metadata;
    if (!m && message.parts.length && note.textContent === "Thinking…") setText(note, "");
    if (waiting(message)) {
      setText(note, "Waiting for a person's approval.");
    } else if (m) {
      const usage = m.usage ? ` · ${m.usage.totalTokens} tokens` : "";
      setText(note, `${m.finishReason || "finished"}${usage}`);
    }
  }

  update();
  return {
    el,
    update,
    setPending(pending) {
      el.setAttribute("aria-busy", pending ? "true" : "false");
      if (pending && !message.parts.length) setText(note, "Thinking…");
      if (!pending && note.textContent === "Thinking…") setText(note, "");
    },
  };
}
