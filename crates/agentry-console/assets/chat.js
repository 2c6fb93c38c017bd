// A chat with an agent over `POST /agents/{id}/chat`, as the AI SDK's `useChat` uses it: the
// last user message as a UIMessage (`{id, role: "user", parts: [{type: "text", text}]}`) with
// `options.conversationId` (so the agent's memory keeps the conversation between turns) and
// `options.userId`; the answer is the UI message stream (SSE; protocol v1): `start`,
// `text-start` / `text-delta` / `text-end`, `tool-input-start` / `tool-input-available`,
// `tool-output-available` / `tool-output-error`, `finish` or `error`, then `[DONE]`.
//
// The transcript shown is kept in sessionStorage with the conversation id, per agent, so that
// a reload shows the same conversation; "New conversation" starts a fresh one.

import { seg } from "./api.js";
import { h, json, randomId, replace, setText } from "./dom.js";
import { stream } from "./sse.js";

const MAX_KEPT = 100;

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
  sessionStorage.setItem(storageKey(agentId), JSON.stringify(session));
}

/**
 * The chat of `agent` (its detail): the conversation line, the log and the message form.
 * `signal` stops a generation in flight when the view goes away.
 */
export function chat(agent, signal) {
  let session = load(agent.id);
  save(agent.id, session);
  let controller = null; // the generation in flight

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
  const alert = h("p", { class: "alert", role: "alert" });
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

  function drawAll() {
    replace(log);
    if (!session.messages.length) {
      log.append(h("p", { class: "muted empty" }, `Say something to ${agent.name}.`));
    }
    for (const m of session.messages) log.append(messageView(m).el);
    log.scrollTop = log.scrollHeight;
  }

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

    const userMessage = { id: randomId("msg"), role: "user", parts: [{ type: "text", text }] };
    session.messages.push(userMessage);
    log.append(messageView(userMessage).el);
    const assistant = { id: null, role: "assistant", parts: [], metadata: null, error: null };
    const view = messageView(assistant);
    view.setPending(true);
    log.append(view.el);
    log.scrollTop = log.scrollHeight;
    input.value = "";

    controller = new AbortController();
    send.disabled = true;
    stop.disabled = false;
    const body = {
      input: [userMessage],
      options: { conversationId: session.conversationId, userId: "console" },
    };
    try {
      await stream(`/agents/${seg(agent.id)}/chat`, { method: "POST", body, signal: controller.signal }, (msg) => {
        if (msg.data === "[DONE]") return;
        let chunk;
        try {
          chunk = JSON.parse(msg.data);
        } catch {
          return;
        }
        const wasAtBottom = atBottom();
        apply(assistant, chunk);
        view.update();
        follow(wasAtBottom);
      });
    } catch (e) {
      if (e.name === "AbortError") {
        assistant.error = "Stopped.";
      } else {
        assistant.error = e.message;
        alert.textContent = e.message;
      }
      view.update();
    } finally {
      view.setPending(false);
      controller = null;
      send.disabled = false;
      stop.disabled = true;
      session.messages.push(assistant);
      save(agent.id, session);
      if (!signal.aborted) input.focus();
    }
  });

  drawAll();
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
      let part = message.parts.find((p) => p.type === "text" && p.id === chunk.id);
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

const TOOL_STATE = {
  "input-streaming": "calling…",
  "input-available": "running…",
  "output-available": "done",
  "output-error": "failed",
};

/**
 * The view of one message, updated in place as its parts grow: `{el, update(), setPending()}`.
 * Text parts are spans whose text is extended; tool parts are regions named after the tool.
 */
function messageView(message) {
  const body = h("div", { class: "parts" });
  const footer = h("div", { class: "small muted" });
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

  function partView(part) {
    if (part.type === "text") {
      const span = h("div", { class: "text" });
      return { el: span, update: () => setText(span, part.text) };
    }
    const state = h("span", { class: "tool-state" });
    const inputPre = h("pre", { "aria-label": "Tool input" });
    const output = h("div");
    const region = h(
      "section",
      { class: "tool", "aria-label": `Tool call: ${part.toolName}` },
      h("div", {}, "Tool ", h("span", { class: "tool-name" }, part.toolName), state),
      h("div", { class: "tool-label" }, "input"),
      inputPre,
      output,
    );
    let outputKey = null;
    return {
      el: region,
      update() {
        setText(state, TOOL_STATE[part.state] || "");
        setText(inputPre, part.input === undefined ? "…" : json(part.input));
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
    const m = message.metadata;
    if (!m && message.parts.length && footer.textContent === "Thinking…") setText(footer, "");
    if (m) {
      const usage = m.usage ? ` · ${m.usage.totalTokens} tokens` : "";
      setText(footer, `${m.finishReason || "finished"}${usage}`);
    }
  }

  update();
  return {
    el,
    update,
    setPending(pending) {
      el.setAttribute("aria-busy", pending ? "true" : "false");
      if (pending && !message.parts.length) setText(footer, "Thinking…");
      if (!pending && footer.textContent === "Thinking…") setText(footer, "");
    },
  };
}
