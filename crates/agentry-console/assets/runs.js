// Durable agent runs, shared by the approvals page, the agent page, the run page and the chat:
// their URLs, the Approve / Deny form of a tool call that waits for a person, and the card of
// one such call.

import { api, seg } from "./api.js";
import { consoleUrl, facts, h, json, replace, setText, statusBadge, time } from "./dom.js";
import { countdown } from "./live.js";

export const RUN_STATUSES = ["running", "suspended", "completed", "error", "cancelled"];
export const RUN_TERMINAL = new Set(["completed", "error", "cancelled"]);

/** The API path of a run. */
export function runPath(agentId, runId) {
  return `/agents/${seg(agentId)}/runs/${seg(runId)}`;
}

/** The console URL of a run's page. */
export function runUrl(agentId, runId) {
  return consoleUrl(`/agents/${seg(agentId)}/runs/${seg(runId)}`);
}

/** A link to a run's page. */
export function runLink(agentId, runId, text = runId) {
  return h("a", { href: runUrl(agentId, runId), class: "mono" }, text);
}

/** A link to an agent's page. */
export function agentLink(agentId, text = agentId) {
  return h("a", { href: consoleUrl(`/agents/${seg(agentId)}`) }, text);
}

/** A run's error (a string or an object with a message) as text. */
export function errorText(error) {
  if (error === null || error === undefined) return "";
  if (typeof error === "string") return error;
  return error.message || json(error);
}

/** Answers a tool approval: `{runId, approvalId, approved, status}`. */
export function answerApproval(agentId, runId, approvalId, approved, reason) {
  const body = { approved };
  if (reason) body.reason = reason;
  return api(`${runPath(agentId, runId)}/approvals/${seg(approvalId)}`, { method: "POST", body });
}

/** A refused answer, as a person reads it. */
export function approvalErrorText(e) {
  if (e.code === "approval_not_pending") {
    return "Not taken: this approval is no longer pending. It was answered already (elsewhere?), its deadline passed, or its run ended.";
  }
  if (e.code === "approval_not_found") return "Not taken: the run has no such approval.";
  return e.message || String(e);
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(new DOMException("Aborted", "AbortError"));
      },
      { once: true },
    );
  });

/**
 * Reads a run's state until it stops running (it completed, failed, or waits again), calling
 * `onState(state)` with each read. Ends quietly when `signal` aborts.
 */
export async function followRun(agentId, runId, signal, onState) {
  let wait = 400;
  try {
    for (;;) {
      const state = await api(runPath(agentId, runId), { signal });
      onState(state);
      if (state.status !== "running") return state;
      await sleep(wait, signal);
      wait = Math.min(2000, wait * 1.5);
    }
  } catch (e) {
    if (e.name === "AbortError" || signal.aborted) return null;
    throw e;
  }
}

let formCount = 0;

/**
 * Approve / Deny of one tool call, with an optional reason (the model is told it on a denial).
 * `onAnswer(approved, reason)` sends the answer: meanwhile the controls are disabled; a refusal
 * is shown below them (they come back, unless the approval is no longer pending); a success
 * leaves them disabled. `onBusy(busy)` and `onInput()` tell a live list the reader is at work.
 * Enter in the reason answers nothing: only the buttons do.
 */
export function approvalForm({ label, onAnswer, onBusy = () => {}, onInput = () => {} }) {
  const id = `approval-reason-${++formCount}`;
  const reason = h("input", {
    id,
    name: "reason",
    type: "text",
    autocomplete: "off",
    maxlength: 2000,
    "aria-describedby": `${id}-hint`,
  });
  const approve = h("button", { type: "button", class: "primary" }, "Approve");
  const deny = h("button", { type: "button", class: "danger" }, "Deny");
  const alert = h("p", { class: "alert", role: "alert" });
  const form = h(
    "form",
    { class: "inline-form approval-form", "aria-label": label },
    h(
      "div",
      { class: "field" },
      h("label", { for: id }, "Reason"),
      reason,
      h("span", { class: "hint", id: `${id}-hint` }, "Optional. On a denial the agent is told why."),
    ),
    h("div", { class: "form-actions" }, approve, deny),
  );
  form.addEventListener("submit", (event) => event.preventDefault());
  form.addEventListener("input", () => onInput());

  let done = false;
  const setDisabled = (disabled) => {
    for (const el of [reason, approve, deny]) el.disabled = disabled;
  };
  async function answer(approved) {
    if (done) return;
    alert.textContent = "";
    setDisabled(true);
    onBusy(true);
    try {
      await onAnswer(approved, reason.value.trim() || undefined);
      done = true;
    } catch (e) {
      if (e.name === "AbortError") return;
      alert.textContent = approvalErrorText(e);
      if (e.code === "approval_not_pending" || e.code === "approval_not_found") done = true;
    } finally {
      onBusy(false);
      if (!done) setDisabled(false);
    }
  }
  approve.addEventListener("click", () => answer(true));
  deny.addEventListener("click", () => answer(false));
  return {
    el: h("div", { class: "approval" }, form, alert),
    setDisabled(disabled) {
      done = done || disabled;
      setDisabled(disabled);
    },
  };
}

/**
 * The card of one tool call that waits for approval in `run` (its state): the agent, the tool,
 * its arguments, the deadline counting down, the run; Approve / Deny. Once answered it shows the
 * outcome, followed (unless `follow` is false) until the run stops running: its status and its
 * answer. `onAnswered(result)` is called after an answer, and with `null` after a refusal that
 * says it waits no more (409, 404). `{li, touched, busy, answered, gone, leave()}`: `leave()` says it waits no more.
 */
export function approvalCard(run, approval, { agentName, signal, showRun = true, follow = true, onAnswered = () => {} }) {
  const stop = new AbortController(); // the countdown
  signal.addEventListener("abort", () => stop.abort(), { once: true });
  const key = `${run.runId}/${approval.approvalId}`;
  const headingId = `tool-approval-${key.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const state = h("p", { class: "small muted", "aria-live": "polite" });
  const outcome = h("div", { class: "outcome", "aria-live": "polite" });

  const showOutcome = (approved, status, text, error) =>
    replace(
      outcome,
      h(
        "p",
        { class: "notice" },
        approved ? "Approved" : "Denied",
        ": the run is now ",
        statusBadge(status),
        showRun ? [" · ", runLink(run.agentId, run.runId, "Open the run")] : null,
      ),
      text ? h("p", { class: "run-text" }, text) : null,
      error ? h("p", { class: "alert" }, errorText(error)) : null,
    );

  const form = approvalForm({
    label: `Answer ${approval.toolName} (${approval.approvalId})`,
    onBusy: (busy) => {
      card.busy = busy;
      if (busy) card.touched = true;
    },
    onInput: () => (card.touched = true),
    async onAnswer(approved, reason) {
      let result;
      try {
        result = await answerApproval(run.agentId, run.runId, approval.approvalId, approved, reason);
      } catch (e) {
        // Answered elsewhere, expired, or gone: the list is read again (the form says why).
        if (e.status === 409 || e.status === 404) onAnswered(null);
        throw e;
      }
      card.answered = true;
      showOutcome(approved, result.status);
      onAnswered(result);
      if (follow) {
        followRun(run.agentId, run.runId, signal, (s) => showOutcome(approved, s.status, s.text, s.error)).catch((e) => {
          setText(state, `Could not read the run: ${e.message}`);
        });
      }
    },
  });

  const article = h(
    "article",
    { class: "card", "aria-labelledby": headingId },
    h(
      "div",
      { class: "card-head" },
      h(
        "h3",
        { id: headingId },
        showRun ? [`${agentName || run.agentId} · `, h("code", {}, approval.toolName), " · ", runLink(run.agentId, run.runId)] : ["Tool ", h("code", {}, approval.toolName)],
      ),
    ),
    facts([
      ["Agent", showRun ? h("span", {}, agentLink(run.agentId, agentName || run.agentId), " ", h("code", {}, run.agentId)) : undefined],
      ["Tool", showRun ? h("code", {}, approval.toolName) : undefined],
      ["Arguments", h("pre", { "aria-label": "Arguments" }, json(approval.args))],
      [
        "Deadline",
        approval.deadline
          ? h("span", {}, time(approval.deadline), " · ", countdown(approval.deadline, stop.signal))
          : h("span", { class: "muted" }, "none"),
      ],
      ["Waiting since", showRun ? time(run.updatedAt) : undefined],
      ["Conversation", showRun && run.conversationId ? h("code", {}, run.conversationId) : undefined],
      ["User", showRun && run.userId ? h("code", {}, run.userId) : undefined],
      ["Approval", h("code", {}, approval.approvalId)],
    ]),
    state,
    form.el,
    outcome,
  );

  const card = {
    key,
    li: h("li", { dataset: { approvalKey: key } }, article),
    touched: false,
    busy: false,
    answered: false,
    gone: false,
    leave() {
      // No longer pending: answered (here or elsewhere), expired, or the run ended.
      card.gone = true;
      stop.abort();
      article.classList.add("done");
      if (!card.answered && !card.busy) {
        form.setDisabled(true);
        setText(state, "No longer waiting: it was answered elsewhere, its deadline passed, or the run ended.");
      }
    },
  };
  return card;
}

/**
 * Keeps the cards of `items` (`[{key, ...}]`, in order) in `list`: new ones made by
 * `make(item)`, gone ones removed, unless the reader worked on them (then `leave()` says so).
 * Returns how many are shown.
 */
export function syncCards(list, cards, items, make, emptyText) {
  const present = new Set(items.map((i) => i.key));
  for (const [key, card] of cards) {
    if (present.has(key) || card.gone) continue;
    card.leave();
    if (!card.touched) {
      card.li.remove();
      cards.delete(key);
    }
  }
  list.querySelector(".empty")?.remove();
  let at = list.firstElementChild;
  for (const item of items) {
    let card = cards.get(item.key);
    if (!card || card.gone) {
      card?.li.remove();
      card = make(item);
      cards.set(item.key, card);
    }
    while (at && at !== card.li && cards.get(at.dataset.approvalKey)?.gone) at = at.nextElementSibling;
    if (card.li !== at) list.insertBefore(card.li, at);
    else at = at.nextElementSibling;
  }
  if (!cards.size && emptyText) list.append(h("li", { class: "empty muted" }, emptyText));
  return cards.size;
}
