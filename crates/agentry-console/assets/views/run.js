// /console/agents/<id>/runs/<runId>: one durable run of an agent. Its status, conversation,
// user, times and usage; the tool calls waiting for approval, each with Approve / Deny; its
// answer (or error); its live scores; its steps in order (model calls, tool calls, approvals:
// attempt, times, usage, what each did); and its messages as the model sees them. While the run is not over,
// its state is read again every two seconds (tab visible) and the parts that changed are drawn
// again in place.

import { api, seg } from "../api.js";
import { consoleUrl, duration, facts, h, json, jsonDetails, replace, setStatus, statusBadge, time } from "../dom.js";
import { poll } from "../live.js";
import { RUN_TERMINAL, agentLink, approvalCard, errorText, runPath, syncCards } from "../runs.js";
import { scoreTable } from "../scores.js";

const STEP_KIND = { "model-call": "model call", "tool-call": "tool call", approval: "approval" };

function usageText(u) {
  if (!u) return null;
  return `${u.totalTokens} tokens (${u.promptTokens} in, ${u.completionTokens} out)`;
}

export async function render({ main, params, signal, title }) {
  const agentId = params.id;
  const runId = params.runId;
  title(`Run ${runId}`);
  const [agent, first] = await Promise.all([
    api(`/agents/${seg(agentId)}`, { signal }),
    api(runPath(agentId, runId), { signal }),
  ]);
  let state = first;

  const status = statusBadge(state.status);
  status.dataset.testid = "run-status";
  const summary = h("div");
  const approvals = h("ul", { class: "plain grid", "aria-label": "Waiting for approval" });
  const approvalsSection = h(
    "section",
    { "aria-labelledby": "run-approvals-title", hidden: true },
    h("h2", { id: "run-approvals-title" }, "Waiting for approval"),
    approvals,
  );
  const answer = h("section", { "aria-labelledby": "run-answer-title" });
  const scores = h("section", { "aria-labelledby": "run-scores-title", hidden: true });
  const actions = h("div", { class: "actions" });
  const steps = h("ol", { class: "timeline", "aria-label": "Steps" });
  const messages = h("ol", { class: "plain run-messages", "aria-label": "Messages" });
  const refreshError = h("p", { class: "alert", role: "alert" });

  replace(
    main,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Run ", h("span", { class: "mono" }, runId)),
      h("p", {}, h("a", { href: consoleUrl(`/agents/${seg(agentId)}`) }, `All runs of ${agent.name}`)),
    ),
    refreshError,
    h(
      "div",
      { class: "exec-layout" },
      h(
        "div",
        {},
        summary,
        approvalsSection,
        answer,
        scores,
        h("section", { "aria-labelledby": "run-actions-title" }, h("h2", { id: "run-actions-title" }, "Actions"), actions),
        h("section", { "aria-labelledby": "run-steps-title" }, h("h2", { id: "run-steps-title" }, "Steps"), steps),
      ),
      h("section", { "aria-labelledby": "run-messages-title" }, h("h2", { id: "run-messages-title" }, "Messages"), messages),
    ),
  );

  // ---- Drawing the state (each part only when it changed) ----
  const keys = {};
  const changed = (name, value) => {
    const key = json(value);
    if (keys[name] === key) return false;
    keys[name] = key;
    return true;
  };
  const cards = new Map(); // runId/approvalId -> card
  const stepRows = new Map(); // step id -> {li, status, meta, io, key}

  function draw() {
    setStatus(status, state.status);
    if (changed("summary", [state.status, state.updatedAt, state.endAt, state.reason, state.finishReason, state.usage, state.lease])) {
      replace(
        summary,
        facts([
          ["Status", status],
          ["Agent", h("span", {}, agentLink(agentId, agent.name), " ", h("code", {}, agentId))],
          ["Conversation", state.conversationId ? h("code", {}, state.conversationId) : h("span", { class: "muted" }, "—")],
          ["Origin", state.origin ? h("span", { class: "status status-started origin" }, state.origin === "a2a" ? "A2A task" : state.origin) : undefined],
          ["User", state.userId ? h("code", {}, state.userId) : h("span", { class: "muted" }, "—")],
          ["Started", time(state.startAt)],
          ["Updated", time(state.updatedAt)],
          ["Ended", time(state.endAt)],
          ["Duration", h("span", { class: "nums" }, state.endAt ? duration(new Date(state.endAt) - new Date(state.startAt)) : "—")],
          ["Waiting because", state.reason || undefined],
          ["Finish reason", state.finishReason ? h("code", {}, state.finishReason) : undefined],
          ["Usage", usageText(state.usage) || undefined],
          ["Held by", state.lease ? h("span", {}, h("code", {}, state.lease.node), ` · epoch ${state.lease.epoch}`) : undefined],
        ]),
      );
    }

    const pending = state.status === "suspended" ? state.pendingApprovals || [] : [];
    const shown = syncCards(
      approvals,
      cards,
      pending.map((approval) => ({ key: `${runId}/${approval.approvalId}`, approval })),
      ({ approval }) =>
        approvalCard(state, approval, { signal, showRun: false, follow: false, onAnswered: () => refreshState() }),
      null,
    );
    approvalsSection.hidden = shown === 0;

    if (changed("answer", [state.status, state.text, state.error])) {
      const parts = [h("h2", { id: "run-answer-title" }, state.status === "error" ? "Error" : "Answer")];
      if (state.error) parts.push(h("p", { class: "alert" }, errorText(state.error)));
      if (state.text) parts.push(h("div", { class: "run-text", "aria-label": "Text" }, state.text));
      else if (!state.error) {
        parts.push(h("p", { class: "muted" }, RUN_TERMINAL.has(state.status) ? "No text." : "No text yet."));
      }
      replace(answer, parts);
    }

    if (changed("scores", state.scores)) {
      const list = state.scores || [];
      scores.hidden = list.length === 0;
      replace(scores, h("h2", { id: "run-scores-title" }, "Scores"), scoreTable(list, { agentId, label: "Scores", showRun: false }));
    }

    if (changed("actions", state.status)) drawActions();
    drawSteps();
    if (changed("messages", state.messages)) drawMessages();
  }

  function drawActions() {
    if (RUN_TERMINAL.has(state.status)) {
      replace(actions, h("p", { class: "muted" }, `None: the run is ${state.status}.`));
      return;
    }
    const alert = h("p", { class: "alert", role: "alert" });
    const button = h("button", { type: "button", class: "danger" }, "Cancel run");
    button.addEventListener("click", async () => {
      alert.textContent = "";
      button.disabled = true;
      try {
        await api(`${runPath(agentId, runId)}/cancel`, { method: "POST", body: { reason: "Cancelled from the console" } });
        await refreshState();
      } catch (e) {
        alert.textContent = e.message;
      } finally {
        button.disabled = false;
      }
    });
    replace(actions, h("div", {}, button, alert));
  }

  function drawSteps() {
    const list = state.steps || [];
    list.forEach((s, i) => {
      let row = stepRows.get(s.id);
      if (!row) {
        const badge = statusBadge(s.status);
        badge.dataset.testid = "step-status";
        row = {
          li: h("li", { dataset: { stepId: s.id, kind: s.kind } }),
          status: badge,
          meta: h("div", { class: "step-meta" }),
          io: h("div", { class: "step-io" }),
          key: null,
        };
        row.li.append(
          h(
            "div",
            { class: "step" },
            h("div", { class: "step-head" }, badge, h("span", { class: "step-id" }, s.id), h("span", { class: "small muted step-kind" }, STEP_KIND[s.kind] || s.kind)),
            row.meta,
            row.io,
          ),
        );
        stepRows.set(s.id, row);
      }
      if (steps.children[i] !== row.li) steps.insertBefore(row.li, steps.children[i] || null);
      updateStep(row, s);
    });
    if (!list.length && !steps.children.length) steps.append(h("li", { class: "muted" }, "No step yet."));
    else steps.querySelector(":scope > li.muted")?.remove();
  }

  function updateStep(row, s) {
    const key = json(s);
    if (key === row.key) return;
    row.key = key;
    setStatus(row.status, s.status);
    const ms = s.endedAt ? new Date(s.endedAt) - new Date(s.startedAt) : null;
    replace(
      row.meta,
      h("span", {}, `attempt ${s.attempt}`),
      h("span", {}, "started ", time(s.startedAt)),
      s.endedAt ? h("span", {}, "ended ", time(s.endedAt)) : null,
      h("span", {}, ms !== null ? `took ${duration(ms)}` : s.status === "suspended" ? "waiting" : "running…"),
      s.usage ? h("span", {}, usageText(s.usage)) : null,
    );
    const open = {};
    for (const d of row.io.querySelectorAll("details")) open[d.dataset.part] = d.open;
    const part = (name, value) => {
      if (value === undefined || value === null) return null;
      const d = jsonDetails(name, value, open[name] ?? false);
      d.dataset.part = name;
      return d;
    };
    const approvalText = s.approval
      ? `${s.approval.expired ? "Expired" : s.approval.approved ? "Approved" : "Denied"}${s.approval.reason ? `: ${s.approval.reason}` : ""}${s.approval.by ? ` (by ${s.approval.by})` : ""}`
      : null;
    replace(
      row.io,
      s.text ? h("p", { class: "step-text" }, s.text) : null,
      approvalText ? h("p", { class: "step-text" }, approvalText) : null,
      s.toolCalls && s.toolCalls.length ? part("Tool calls", s.toolCalls) : null,
      part("Call", s.call),
      part("Result", s.result),
    );
  }

  function drawMessages() {
    replace(
      messages,
      (state.messages || []).map((m, i) =>
        h(
          "li",
          { class: `msg ${m.role === "user" || m.role === "assistant" ? m.role : "other"}`, dataset: { index: i, role: m.role } },
          h("div", { class: "who" }, m.toolResult ? `${m.role} · ${m.toolResult.toolName}` : m.role),
          // A tool message's content is its result as JSON text: shown below as JSON instead.
          m.content && !m.toolResult ? h("div", { class: "text" }, m.content) : null,
          m.toolCalls && m.toolCalls.length
            ? m.toolCalls.map((c) => h("div", { class: "tool" }, "Tool call ", h("span", { class: "tool-name" }, c.toolName), h("pre", { "aria-label": "Arguments" }, json(c.args))))
            : null,
          m.toolResult ? h("pre", { "aria-label": `Result of ${m.toolResult.toolName}` }, json(m.toolResult.result)) : null,
        ),
      ),
    );
    if (!messages.children.length) messages.append(h("li", { class: "muted" }, "No message."));
  }

  // ---- Reading the state again (coalesced: one read at a time, one more if asked meanwhile) ----
  let reading = null;
  let again = false;
  async function refreshState() {
    if (reading) {
      again = true;
      return reading;
    }
    reading = (async () => {
      do {
        again = false;
        try {
          state = await api(runPath(agentId, runId), { signal });
          refreshError.textContent = "";
          draw();
        } catch (e) {
          if (e.name === "AbortError" || signal.aborted) return;
          refreshError.textContent = e.message;
        }
      } while (again && !signal.aborted);
    })();
    try {
      await reading;
    } finally {
      reading = null;
    }
  }

  draw();
  // Live scores come a moment after the answer (when the agent scores this run): a completed
  // run without any is read again a few times more.
  let scoreReads = 0;
  poll(
    async () => {
      if (!RUN_TERMINAL.has(state.status)) await refreshState();
      else if (state.status === "completed" && !(state.scores || []).length && scoreReads++ < 5) await refreshState();
    },
    2000,
    signal,
  );
}
