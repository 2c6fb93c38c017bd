// /console/approvals: everything that waits for a person, newest first. Suspended workflow
// executions: why each waits, what the suspending step attached, its deadline counting down,
// and a Resume form generated from its workflow's resumeSchema. Agent tool calls that wait for
// approval (one card per pending approval of each suspended durable run): the agent, the tool,
// its arguments, the deadline, and Approve / Deny with a reason. Kept live (read again every
// three seconds while the tab is visible): new ones appear; one that is no longer waiting goes
// away, unless the reader is working on it, then it says so and its form is disabled.

import { resumeForm } from "../actions.js";
import { ApiError, api, cached, executionPages, query, runPages, workflowDetail } from "../api.js";
import { executionLink, facts, h, json, replace, setText, time } from "../dom.js";
import { countdown, poll } from "../live.js";
import { approvalCard, runPath, syncCards } from "../runs.js";

const PAGE = 25;

export async function render({ main, signal, title }) {
  title("Approvals");
  const list = h("ul", { class: "plain grid approvals", "aria-label": "Waiting executions" });
  const count = h("p", { class: "muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const tools = toolApprovals(signal);
  replace(
    main,
    h("div", { class: "page-head" }, h("h1", {}, "Approvals"), count),
    h("p", {}, "Everything that waits for a person, newest first."),
    error,
    h(
      "section",
      { "aria-labelledby": "waiting-executions-title" },
      h("h2", { id: "waiting-executions-title" }, "Workflow executions"),
      h("p", { class: "small muted" }, "Suspended executions. Resume one with the data its workflow asks for."),
      list,
      h("div", { class: "form-actions below" }, more),
    ),
    tools.section,
  );

  const cards = new Map(); // executionId -> card
  let chain = Promise.resolve();
  const serial = (fn) => (chain = chain.then(fn, fn));

  const pages = executionPages(
    (cursor, limit) => api(`/executions${query({ status: "suspended", limit, cursor })}`, { signal }),
    PAGE,
  );

  const refresh = () =>
    serial(async () => {
      const done = await Promise.allSettled([
        (async () => {
          await pages.refresh();
          await draw();
        })(),
        tools.refresh(),
      ]);
      showCount();
      const failed = done.find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
      error.textContent = "";
    });

  const loadMore = () =>
    serial(async () => {
      await pages.more();
      await draw();
    });

  async function draw() {
    const { items, nextCursor } = pages;
    // The schemas of every workflow shown (read once per page load).
    const details = new Map();
    for (const id of new Set(items.map((e) => e.workflowId))) details.set(id, await workflowDetail(id));
    if (signal.aborted) return;

    const present = new Set(items.map((e) => e.executionId));
    for (const [id, card] of cards) {
      if (present.has(id) || card.gone) continue;
      if (card.touched) {
        card.leave();
      } else {
        card.stop.abort();
        card.li.remove();
        cards.delete(id);
      }
    }
    list.querySelector(".empty")?.remove();
    let at = list.firstElementChild;
    for (const e of items) {
      let card = cards.get(e.executionId);
      if (!card || card.gone) {
        card?.li.remove();
        card = makeCard(e, details.get(e.workflowId), signal);
        cards.set(e.executionId, card);
      }
      card.update(e);
      while (at && at !== card.li && cards.get(at.dataset.executionId)?.gone) at = at.nextElementSibling;
      if (card.li !== at) list.insertBefore(card.li, at);
      else at = at.nextElementSibling;
    }
    if (!cards.size) list.append(h("li", { class: "empty muted" }, "No execution is suspended."));
    more.hidden = !nextCursor;
  }

  function showCount() {
    const n = pages.items.length + tools.count();
    setText(count, `${n}${pages.nextCursor || tools.hasMore() ? "+" : ""} waiting`);
  }

  more.addEventListener("click", () => loadMore().catch(showError));
  tools.onMore(() =>
    serial(async () => {
      await tools.more();
      showCount();
    }).catch(showError),
  );
  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  tools.onAnswered(() => refresh().catch(showError));
  // A list that cannot be read says so above both lists; the other is still shown.
  await refresh().catch(showError);
  poll(refresh, 3000, signal, showError);
}

/** One waiting execution: its suspension and its Resume form. */
function makeCard(e, workflow, viewSignal) {
  const stop = new AbortController();
  viewSignal.addEventListener("abort", () => stop.abort(), { once: true });
  const headingId = `approval-${e.executionId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const s = e.suspension || {};
  const state = h("p", { class: "small muted", "aria-live": "polite" });
  const card = {
    li: h("li", { dataset: { executionId: e.executionId } }),
    stop,
    touched: false,
    gone: false,
    update() {},
    leave() {
      // No longer suspended (resumed elsewhere, cancelled, or its deadline fired).
      card.gone = true;
      stop.abort();
      article.classList.add("done");
      if (!card.resumed && !card.busy) {
        for (const el of article.querySelectorAll("input, select, textarea, button")) el.disabled = true;
        setText(state, "No longer waiting: it was resumed or cancelled elsewhere, or its deadline passed.");
      }
    },
  };
  const form = resumeForm(workflow, e.executionId, {
    onDone: () => {
      card.resumed = true;
      card.touched = true;
    },
    onBusy: (busy) => {
      card.busy = busy;
      if (busy) card.touched = true;
    },
  });
  form.addEventListener("input", () => (card.touched = true));

  const article = h(
    "article",
    { class: "card", "aria-labelledby": headingId },
    h(
      "div",
      { class: "card-head" },
      h("h3", { id: headingId }, `${workflow.name} · `, executionLink(e.executionId)),
    ),
    facts([
      ["Reason", s.reason],
      ["Suspended", time(s.suspendedAt)],
      ["Step", h("code", {}, s.stepId)],
      ["Deadline", s.deadline ? h("span", {}, time(s.deadline), " · ", countdown(s.deadline, stop.signal)) : undefined],
      ["Started", time(e.startAt)],
      ["User", e.userId ? h("code", {}, e.userId) : undefined],
      ["Suspend data", s.suspendData !== undefined && s.suspendData !== null ? h("pre", {}, json(s.suspendData)) : undefined],
    ]),
    state,
    form,
  );
  card.li.append(article);
  return card;
}

/**
 * The tool calls that wait for approval: the suspended durable runs of every agent
 * (`GET /agent-runs?status=suspended`, paged), each run's state (read again only when its
 * `updatedAt` moved), one card per pending approval.
 */
function toolApprovals(signal) {
  const list = h("ul", { class: "plain grid approvals", "aria-label": "Waiting tool calls" });
  const more = h("button", { type: "button", hidden: true }, "Load more tool calls");
  const section = h(
    "section",
    { "aria-labelledby": "waiting-tools-title" },
    h("h2", { id: "waiting-tools-title" }, "Agent tool calls"),
    h("p", { class: "small muted" }, "Tool calls of durable agent runs that wait for a person's approval."),
    list,
    h("div", { class: "form-actions below" }, more),
  );
  const cards = new Map(); // runId/approvalId -> card
  const states = new Map(); // runId -> {updatedAt, state}
  let shown = 0;
  const pages = runPages((cursor, limit) => api(`/agent-runs${query({ status: "suspended", limit, cursor })}`, { signal }), PAGE);

  async function stateOf(run) {
    const kept = states.get(run.runId);
    if (kept && kept.updatedAt === run.updatedAt) return kept.state;
    try {
      const state = await api(runPath(run.agentId, run.runId), { signal });
      states.set(run.runId, { updatedAt: run.updatedAt, state });
      return state;
    } catch (e) {
      // Gone since the list was read (a run removed): nothing waits there.
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  }

  async function draw() {
    const runs = pages.items;
    const [agents, runStates] = await Promise.all([
      cached("/agents").catch(() => []),
      Promise.all(runs.map(stateOf)),
    ]);
    if (signal.aborted) return;
    const names = new Map(agents.map((a) => [a.id, a.name]));
    const present = new Set(runs.map((r) => r.runId));
    for (const id of states.keys()) if (!present.has(id)) states.delete(id);
    const items = [];
    runs.forEach((run, i) => {
      const state = runStates[i];
      if (!state || state.status !== "suspended") return;
      for (const approval of state.pendingApprovals || []) {
        items.push({ key: `${run.runId}/${approval.approvalId}`, run: { ...run, ...state }, approval });
      }
    });
    shown = items.length;
    syncCards(
      list,
      cards,
      items,
      ({ run, approval }) =>
        approvalCard(run, approval, {
          agentName: names.get(run.agentId),
          signal,
          onAnswered: () => refreshSoon(),
        }),
      "No tool call is waiting for a person.",
    );
    more.hidden = !pages.nextCursor;
  }

  // After an answer, the list is read again at once (the run no longer waits).
  let onRefreshSoon = () => {};
  const refreshSoon = () => onRefreshSoon();

  return {
    section,
    count: () => shown,
    hasMore: () => Boolean(pages.nextCursor),
    async refresh() {
      await pages.refresh();
      await draw();
    },
    async more() {
      await pages.more();
      await draw();
    },
    onMore(fn) {
      more.addEventListener("click", fn);
    },
    onAnswered(fn) {
      onRefreshSoon = fn;
    },
  };
}
