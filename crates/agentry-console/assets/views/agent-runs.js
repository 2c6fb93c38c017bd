// The durable runs of one agent, on its page: newest first, filtered by status (`?status=` in
// the URL), paged with the API's cursor ("Load more"), and kept live like the executions list
// (the runs shown read again every two seconds while the tab is visible, rows updated in place).
// Each links to its run's page.

import { api, query, runPages, seg } from "../api.js";
import { consoleUrl, duration, h, setStatus, setText, setTime, statusBadge, time } from "../dom.js";
import { poll } from "../live.js";
import { pushUrl } from "../router.js";
import { RUN_STATUSES, runLink } from "../runs.js";

const PAGE = 25;

/** The section of `agent`'s runs; `params` is the page's query (its `status`). */
export function runList(agent, params, signal) {
  const filter = { status: RUN_STATUSES.includes(params.get("status")) ? params.get("status") : "" };
  const statusSelect = h(
    "select",
    { id: "runs-status", name: "status" },
    h("option", { value: "" }, "Any status"),
    RUN_STATUSES.map((s) => h("option", { value: s, selected: s === filter.status }, s)),
  );
  const tbody = h("tbody");
  const summary = h("p", { class: "small muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const section = h(
    "section",
    { "aria-labelledby": "runs-title" },
    h("h2", { id: "runs-title" }, "Runs"),
    h("p", { class: "small muted" }, "Durable runs of this agent: recorded call by call, they go on without their client."),
    h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter runs" },
      h("div", {}, h("label", { for: "runs-status" }, "Run status"), statusSelect),
    ),
    error,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Runs" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Run"),
            h("th", { scope: "col" }, "Status"),
            h("th", { scope: "col" }, "Started"),
            h("th", { scope: "col", class: "hide-narrow" }, "Duration"),
            h("th", { scope: "col", class: "hide-narrow" }, "Conversation"),
            h("th", { scope: "col", class: "hide-narrow" }, "User"),
          ),
        ),
        tbody,
      ),
    ),
    h("div", { class: "form-actions below" }, more, summary),
  );

  const rows = new Map(); // runId -> row
  let chain = Promise.resolve();
  const serial = (fn) => (chain = chain.then(fn, fn));
  const pages = runPages(
    (cursor, limit) => api(`/agents/${seg(agent.id)}/runs${query({ status: filter.status, limit, cursor })}`, { signal }),
    PAGE,
  );

  function draw() {
    const { items, nextCursor } = pages;
    const keep = new Set(items.map((r) => r.runId));
    for (const [id, row] of rows) {
      if (!keep.has(id)) {
        row.tr.remove();
        rows.delete(id);
      }
    }
    tbody.querySelector(".empty-row")?.remove();
    let at = tbody.firstElementChild;
    for (const r of items) {
      let row = rows.get(r.runId);
      if (!row) {
        row = makeRow(agent.id, r);
        rows.set(r.runId, row);
      }
      updateRow(row, r);
      if (row.tr !== at) tbody.insertBefore(row.tr, at);
      else at = at.nextElementSibling;
    }
    if (!items.length) {
      tbody.append(
        h(
          "tr",
          { class: "empty-row" },
          h("td", { colspan: 6, class: "muted" }, filter.status ? `No ${filter.status} runs.` : "No durable runs yet."),
        ),
      );
    }
    more.hidden = !nextCursor;
    setText(summary, `${items.length} run${items.length === 1 ? "" : "s"} shown${nextCursor ? "; more below" : ""}.`);
  }

  const refresh = () =>
    serial(async () => {
      await pages.refresh();
      error.textContent = "";
      draw();
    });

  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  more.addEventListener("click", () =>
    serial(async () => {
      more.disabled = true;
      try {
        await pages.more();
        error.textContent = "";
        draw();
      } finally {
        more.disabled = false;
      }
    }).catch(showError),
  );
  statusSelect.addEventListener("change", () => {
    filter.status = statusSelect.value;
    pushUrl(consoleUrl(`/agents/${seg(agent.id)}`, filter));
    pages.reset();
    for (const row of rows.values()) row.tr.remove();
    rows.clear();
    refresh().catch(showError);
  });
  section.querySelector("form").addEventListener("submit", (e) => e.preventDefault());

  refresh().catch(showError);
  poll(refresh, 2000, signal, showError);
  return section;
}

function makeRow(agentId, r) {
  const status = statusBadge(r.status);
  const start = time(r.startAt);
  const dur = h("span", { class: "nums" });
  const tr = h(
    "tr",
    { dataset: { runId: r.runId } },
    h("td", { class: "id" }, runLink(agentId, r.runId), r.origin ? [" ", h("span", { class: "status status-started origin", title: "Started as an A2A task" }, r.origin)] : null),
    h("td", {}, status),
    h("td", {}, start),
    h("td", { class: "hide-narrow" }, dur),
    h("td", { class: "hide-narrow id" }, r.conversationId || h("span", { class: "muted" }, "—")),
    h("td", { class: "hide-narrow" }, r.userId || h("span", { class: "muted" }, "—")),
  );
  return { tr, status, start, dur };
}

function updateRow(row, r) {
  setStatus(row.status, r.status);
  if (row.start.tagName === "TIME") setTime(row.start, r.startAt);
  const ms = r.endAt ? new Date(r.endAt) - new Date(r.startAt) : null;
  setText(row.dur, ms === null ? "—" : duration(ms));
}
