// /console/queues: every queue (`GET /queues`), by name: its workflow, its limits (concurrency,
// the concurrency key's pointer and limit, the rate limit, the priority pointer) and what it
// holds now (queued, running, suspended, the oldest wait), each count of queued executions a
// link to the executions list filtered by the workflow and `queued`. Kept live (read again
// every three seconds while the tab is visible); a row is redrawn only when its queue changed.

import { api } from "../api.js";
import { consoleUrl, duration, h, replace, setText } from "../dom.js";
import { poll } from "../live.js";

export async function render({ main, signal, title }) {
  title("Queues");
  const tbody = h("tbody");
  const count = h("p", { class: "muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  replace(
    main,
    h("div", { class: "page-head" }, h("h1", {}, "Queues"), count),
    h(
      "p",
      {},
      "Workflows that wait their turn: an execution enters its queue as queued and starts when the queue's limits allow. ",
      "It holds its slot while running and while suspended.",
    ),
    error,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Queues" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Queue"),
            h("th", { scope: "col" }, "Workflow"),
            h("th", { scope: "col" }, "Limits"),
            h("th", { scope: "col", class: "num" }, "Queued"),
            h("th", { scope: "col", class: "num" }, "Running"),
            h("th", { scope: "col", class: "num" }, "Suspended"),
            h("th", { scope: "col", class: "num" }, "Oldest wait"),
          ),
        ),
        tbody,
      ),
    ),
  );

  const rows = new Map(); // name -> {tr, wait, key}

  async function refresh() {
    const queues = await api("/queues", { signal });
    if (signal.aborted) return;
    error.textContent = "";
    setText(count, `${queues.length} queue${queues.length === 1 ? "" : "s"}`);
    const keep = new Set(queues.map((q) => q.name));
    for (const [name, row] of rows) {
      if (!keep.has(name)) {
        row.tr.remove();
        rows.delete(name);
      }
    }
    tbody.querySelector(".empty-row")?.remove();
    let at = tbody.firstElementChild;
    for (const q of queues) {
      // The oldest wait grows at every read: updated in place, the row redrawn when the rest changed.
      const key = JSON.stringify({ ...q, oldestWaitMs: null });
      let row = rows.get(q.name);
      if (!row || row.key !== key) {
        const fresh = { ...queueRow(q), key };
        if (row) row.tr.replaceWith(fresh.tr);
        row = fresh;
        rows.set(q.name, row);
      }
      setText(row.wait, waitText(q.oldestWaitMs));
      if (row.tr !== at) tbody.insertBefore(row.tr, at);
      else at = at.nextElementSibling;
    }
    if (!queues.length) {
      tbody.append(h("tr", { class: "empty-row" }, h("td", { colspan: 7, class: "muted" }, "No workflow is queued.")));
    }
  }

  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  await refresh();
  poll(refresh, 3000, signal, showError);
}

/** A queue's row, and its cell of the oldest wait: `{tr, wait}`. */
function queueRow(q) {
  const wait = h("td", { class: "num" });
  const tr = h(
    "tr",
    { dataset: { queue: q.name } },
    h("td", {}, h("a", { href: queueUrl(q.name), class: "mono" }, q.name)),
    h("td", {}, h("a", { href: consoleUrl("/executions", { workflow: q.workflowId }) }, q.workflowId)),
    h("td", { class: "small" }, limitsList(q)),
    h("td", { class: "num counts" }, queuedLink(q)),
    h("td", { class: "num" }, String(q.running)),
    h("td", { class: "num" }, String(q.suspended)),
    wait,
  );
  return { tr, wait };
}

/** The console URL of one queue's page. */
export function queueUrl(name) {
  return consoleUrl(`/queues/${encodeURIComponent(name)}`);
}

/** The executions list filtered by the queue's workflow and `queued`. */
export function queuedUrl(q) {
  return consoleUrl("/executions", { workflow: q.workflowId, status: "queued" });
}

/** The count of queued executions, a link to them. */
function queuedLink(q) {
  return h(
    "a",
    { href: queuedUrl(q), class: q.queued ? null : "zero", "aria-label": `${q.name}: ${q.queued} queued` },
    String(q.queued),
  );
}

/** The wait of the oldest queued execution, or a dash when none waits. */
export function waitText(ms) {
  return ms === null || ms === undefined ? "—" : duration(ms);
}

/** A queue's limits as text, one per entry: `[label, value]` (no limit: `null` value). */
export function limits(q) {
  const key = q.concurrencyKey;
  const rate = q.rateLimit;
  return [
    ["Concurrency", q.concurrency === null || q.concurrency === undefined ? null : String(q.concurrency)],
    ["Key", key ? `${key.pointer} · ${key.limit} per key` : null],
    ["Rate", rate ? `${rate.limit} per ${duration(rate.periodMs)}${rate.perKey ? " per key" : ""}` : null],
    ["Priority", q.priority || null],
  ];
}

/** The limits as a compact list for a table cell (`none` when the queue has none). */
function limitsList(q) {
  const set = limits(q).filter(([, value]) => value !== null);
  if (!set.length) return h("span", { class: "muted" }, "none");
  return h(
    "ul",
    { class: "plain limits" },
    set.map(([label, value]) => h("li", {}, h("span", { class: "muted" }, `${label} `), h("code", {}, value))),
  );
}
