// /console/queues/{name}: one queue (`GET /queues/{name}`): its workflow and limits, what it
// holds now (queued, running, suspended, since when the oldest waits), a link to its queued
// executions, and its keys (the most queued first: queued, running, suspended, the oldest
// queued at). Kept live (every two seconds while the tab is visible).

import { api, seg } from "../api.js";
import { consoleUrl, facts, h, replace, setText, time } from "../dom.js";
import { poll } from "../live.js";
import { limits, queuedUrl, waitText } from "./queues.js";

export async function render({ main, params, signal, title }) {
  const name = params.name;
  title(`Queue ${name}`);
  const body = h("div");
  const error = h("p", { class: "alert", role: "alert" });
  replace(
    main,
    h("p", { class: "small" }, h("a", { href: consoleUrl("/queues") }, "← Queues")),
    h("div", { class: "page-head" }, h("h1", {}, "Queue ", h("span", { class: "mono" }, name))),
    error,
    body,
  );
  let shown = "";
  const wait = h("span", { class: "nums", dataset: { testid: "queue-oldest-wait" } });

  async function refresh() {
    const q = await api(`/queues/${seg(name)}`, { signal });
    if (signal.aborted) return;
    error.textContent = "";
    // The wait grows at every read: it is updated in place, the rest drawn when it changed.
    setText(wait, waitText(q.oldestWaitMs));
    const key = JSON.stringify({ ...q, oldestWaitMs: null });
    if (key === shown) return;
    shown = key;
    replace(body, queueFacts(q, wait), keysSection(q));
  }

  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  await refresh();
  poll(refresh, 2000, signal, showError);
}

/** The queue's workflow, limits and figures (`wait`: the oldest wait, kept up to date). */
function queueFacts(q, wait) {
  return h(
    "div",
    {},
    facts([
      ["Workflow", h("a", { href: consoleUrl("/executions", { workflow: q.workflowId }) }, h("code", {}, q.workflowId))],
      ...limits(q).map(([label, value]) => [label, value === null ? h("span", { class: "muted" }, "no limit") : h("code", {}, value)]),
      ["Queued", h("span", { class: "nums", dataset: { testid: "queue-queued" } }, String(q.queued))],
      ["Running", h("span", { class: "nums", dataset: { testid: "queue-running" } }, String(q.running))],
      ["Suspended", h("span", { class: "nums", dataset: { testid: "queue-suspended" } }, String(q.suspended))],
      ["Oldest queued", q.oldestQueuedAt ? h("span", {}, time(q.oldestQueuedAt), " · waiting ", wait) : h("span", { class: "muted" }, "none waits")],
    ]),
    h("p", {}, h("a", { href: queuedUrl(q) }, `Queued executions of ${q.workflowId}`)),
  );
}

/** The per-key table (at most 100 keys, the most queued first). */
function keysSection(q) {
  const keys = q.keys || [];
  return h(
    "section",
    { "aria-labelledby": "keys-title" },
    h("h2", { id: "keys-title" }, "Keys"),
    keys.length
      ? h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { "aria-label": "Keys" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                h("th", { scope: "col" }, "Key"),
                h("th", { scope: "col", class: "num" }, "Queued"),
                h("th", { scope: "col", class: "num" }, "Running"),
                h("th", { scope: "col", class: "num" }, "Suspended"),
                h("th", { scope: "col" }, "Oldest queued at"),
              ),
            ),
            h("tbody", {}, keys.map(keyRow)),
          ),
        )
      : h("p", { class: "muted" }, q.concurrencyKey ? "No key holds an execution now." : "No key holds an execution now (the queue has no concurrency key)."),
  );
}

function keyRow(k) {
  const key = k.key ?? null;
  return h(
    "tr",
    { dataset: { key: key ?? "" } },
    h("td", { class: "id" }, key === null ? h("span", { class: "muted" }, "no key") : key),
    h("td", { class: "num" }, String(k.queued)),
    h("td", { class: "num" }, String(k.running)),
    h("td", { class: "num" }, String(k.suspended)),
    h("td", {}, time(k.oldestQueuedAt)),
  );
}
