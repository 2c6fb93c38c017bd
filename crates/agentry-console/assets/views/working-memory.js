// The working memory section of an agent's page (`GET` and `PUT
// /agents/{id}/memory/working`): whose memory (a user id; a conversation id for a memory kept
// per conversation), its value (JSON, or Markdown text for a template) and when it was last
// written, and an editor that replaces it. With authentication on, the signed-in user's memory
// is shown (the user id left empty); the server refuses another user's. The chat of the same
// page talks as the user `console` (or the signed-in user) in its own conversation: both are the
// defaults here, so what the chat makes the agent remember shows on "Show".

import { api, query, seg } from "../api.js";
import { enabled } from "../auth.js";
import { h, json, replace, setText, time } from "../dom.js";

/** The chat's conversation on this page (see chat.js), if it has one. */
function chatConversation(agentId) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(`agentry.console.chat.${agentId}`));
    return (saved && typeof saved.conversationId === "string" && saved.conversationId) || "";
  } catch {
    return "";
  }
}

/** The section of `agent`'s working memory, or `null` when it keeps none. */
export function workingMemory(agent, signal) {
  const config = agent.memory && agent.memory.config && agent.memory.config.workingMemory;
  if (!config) return null;
  const perConversation = config.scope === "conversation";
  const markdown = config.format === "markdown";
  const userInput = h("input", {
    id: "wm-user",
    name: "userId",
    autocomplete: "off",
    value: enabled() ? "" : "console",
    placeholder: enabled() ? "you (signed in)" : "anonymous",
  });
  const conversationInput = perConversation
    ? h("input", { id: "wm-conversation", name: "conversationId", autocomplete: "off", required: true, value: chatConversation(agent.id) })
    : null;
  const value = h("pre", { id: "wm-value", "aria-label": "Working memory value" });
  const updated = h("p", { class: "small muted", "aria-live": "polite" });
  const editor = h("textarea", { id: "wm-editor", name: "value", rows: 5, spellcheck: "false" });
  const error = h("p", { class: "alert", role: "alert" });
  const notice = h("p", { class: "notice", role: "status" });

  const path = () =>
    `/agents/${seg(agent.id)}/memory/working${query({
      userId: userInput.value.trim(),
      conversationId: conversationInput ? conversationInput.value.trim() : "",
    })}`;

  function show(memory) {
    if (memory.value === null || memory.value === undefined) {
      setText(value, "Nothing yet.");
      value.classList.add("muted");
      editor.value = markdown ? memory.template || "" : "{}";
    } else {
      setText(value, markdown ? memory.value : json(memory.value));
      value.classList.remove("muted");
      editor.value = markdown ? memory.value : json(memory.value);
    }
    replace(updated, memory.updatedAt ? ["Updated ", time(memory.updatedAt)] : "Never written.");
  }

  async function call(work) {
    setText(error, "");
    setText(notice, "");
    try {
      await work();
    } catch (e) {
      if (e.name !== "AbortError") setText(error, e.message);
    }
  }

  const load = () =>
    call(async () => {
      if (conversationInput && !conversationInput.value.trim()) {
        setText(error, "A conversation id is needed: this agent keeps a working memory per conversation.");
        return;
      }
      show(await api(path(), { signal, quiet401: true }));
    });

  const save = () =>
    call(async () => {
      let body;
      if (markdown) {
        body = editor.value;
      } else {
        try {
          body = JSON.parse(editor.value);
        } catch (e) {
          setText(error, `The value is not JSON: ${e.message}`);
          return;
        }
      }
      show(await api(path(), { method: "PUT", body: { value: body }, signal, quiet401: true }));
      setText(notice, "Saved.");
    });

  const form = h(
    "form",
    { class: "inline-form", "aria-label": "Whose working memory", onsubmit: (e) => (e.preventDefault(), load()) },
    h("div", { class: "field" }, h("label", { for: "wm-user" }, "User id"), userInput),
    conversationInput && h("div", { class: "field" }, h("label", { for: "wm-conversation" }, "Conversation id"), conversationInput),
    h("div", { class: "form-actions" }, h("button", { type: "submit" }, "Show")),
  );
  const edit = h(
    "form",
    { "aria-label": "Edit the working memory", onsubmit: (e) => (e.preventDefault(), save()) },
    h("div", { class: "field" }, h("label", { for: "wm-editor" }, markdown ? "New value (Markdown)" : "New value (JSON)"), editor),
    h("div", { class: "form-actions below" }, h("button", { type: "submit", class: "primary" }, "Save")),
  );
  const section = h(
    "section",
    { "aria-labelledby": "wm-title" },
    h("h2", { id: "wm-title" }, "Working memory"),
    h(
      "p",
      { class: "small muted" },
      perConversation ? "Kept per conversation" : "Kept per user, across their conversations",
      markdown ? " as Markdown text; " : " as JSON; ",
      "the agent updates it with update_working_memory.",
    ),
    form,
    error,
    value,
    updated,
    edit,
    notice,
  );
  if (!conversationInput || conversationInput.value) load();
  return section;
}
