// /console/approvals: every suspended execution of every workflow, newest first: why it waits,
// what the suspending step attached, its deadline counting down, and a Resume form generated
// from its workflow's resumeSchema. Kept live (read again every three seconds while the tab is
// visible): new ones appear; one that is no longer waiting goes away, unless the reader is
// working on it, then it says so and its form is disabled.

import { resumeForm } from "../actions.js";
import { api, executionPages, query, workflowDetail } from "../api.js";
import { executionLink, facts, h, json, replace, setText, time } from "../dom.js";
import { countdown, poll } from "../live.js";

const PAGE = 25;

export async function render({ main, signal, title }) {
  title("Approvals");
  const list = h("ul", { class: "plain grid approvals", "aria-label": "Waiting executions" });
  const count = h("p", { class: "muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  replace(
    main,
    h("div", { class: "page-head" }, h("h1", {}, "Approvals"), count),
    h("p", {}, "Every suspended execution, newest first. Resume one with the data its workflow asks for."),
    error,
    list,
    h("div", { class: "form-actions below" }, more),
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
      await pages.refresh();
      await draw();
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
    error.textContent = "";

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
    if (!cards.size) list.append(h("li", { class: "empty muted" }, "Nothing is waiting for a person."));
    more.hidden = !nextCursor;
    setText(count, `${items.length}${nextCursor ? "+" : ""} waiting`);
  }

  more.addEventListener("click", () => loadMore().catch(showError));
  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  await refresh();
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
