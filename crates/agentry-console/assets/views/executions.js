// /console/executions?workflow=<id>&status=<status>: every execution, newest first, filtered by
// workflow and status (both in the URL), paged with the API's cursor ("Load more"), and kept
// live: every two seconds, while the tab is visible, the pages shown are read again and the
// rows updated in place (a row never moves unless an execution is added above it).

import { api, executionPages, query, seg } from "../api.js";
import { consoleUrl, duration, executionLink, h, replace, setStatus, setText, setTime, statusBadge, time } from "../dom.js";
import { poll } from "../live.js";
import { pushUrl } from "../router.js";

/** An execution's statuses, in the order of its life (the filter's and the overview's). */
export const STATUSES = ["queued", "running", "suspended", "completed", "error", "cancelled"];
const PAGE = 25;

export async function render({ main, query: params, signal, title }) {
  title("Executions");
  const workflows = await api("/workflows", { signal });
  const filter = {
    workflow: params.get("workflow") || "",
    status: params.get("status") || "",
  };

  const workflowSelect = h(
    "select",
    { id: "filter-workflow", name: "workflow" },
    h("option", { value: "" }, "All workflows"),
    workflows.map((w) => h("option", { value: w.id, selected: w.id === filter.workflow }, `${w.name} (${w.id})`)),
  );
  const statusSelect = h(
    "select",
    { id: "filter-status", name: "status" },
    h("option", { value: "" }, "Any status"),
    STATUSES.map((s) => h("option", { value: s, selected: s === filter.status }, s)),
  );
  const filters = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter executions" },
    h("div", {}, h("label", { for: "filter-workflow" }, "Workflow"), workflowSelect),
    h("div", {}, h("label", { for: "filter-status" }, "Status"), statusSelect),
  );

  const tbody = h("tbody");
  const summary = h("p", { class: "small muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const heading = h("h1", {}, "Executions");
  // A workflow's versions and their executions in flight (a deploy draining an older one).
  const versions = h("p", { class: "small muted", "data-testid": "workflow-versions" });
  // A definition's document (a Serverless Workflow written as data), as it was read.
  const definition = h("details", { hidden: true, "data-testid": "workflow-definition" });
  if (filter.workflow) {
    api(`/workflows/${seg(filter.workflow)}`, { signal })
      .then((w) => {
        const parts = (w.versions || []).map((v) => {
          const notes = [v.current ? "new executions" : null, v.registered ? null : "not on this server"].filter(Boolean);
          return `${v.version ?? "before versions"}: ${v.inFlight} in flight${notes.length ? ` (${notes.join(", ")})` : ""}`;
        });
        versions.textContent = parts.length ? `Versions — ${parts.join(" · ")}` : "";
        if (w.definition) {
          replace(
            definition,
            h("summary", {}, "Definition (Serverless Workflow document)"),
            h("pre", { class: "small" }, JSON.stringify(w.definition, null, 2)),
          );
          definition.hidden = false;
        }
      })
      .catch(() => {});
  }

  replace(
    main,
    h("div", { class: "page-head" }, heading),
    filters,
    versions,
    definition,
    error,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Executions" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Execution"),
            h("th", { scope: "col" }, "Workflow"),
            h("th", { scope: "col" }, "Status"),
            h("th", { scope: "col" }, "Started"),
            h("th", { scope: "col", class: "hide-narrow" }, "Duration"),
            h("th", { scope: "col", class: "hide-narrow" }, "User"),
          ),
        ),
        tbody,
      ),
    ),
    h("div", { class: "form-actions below" }, more, summary),
  );

  // ---- State: the rows shown, and the cursor of the next page ----
  let loaded = false;
  const rows = new Map(); // executionId -> {tr, status, end, duration}
  let chain = Promise.resolve();
  const serial = (fn) => {
    chain = chain.then(fn, fn);
    return chain;
  };

  const pages = executionPages(
    (cursor, limit) =>
      api(`/executions${query({ workflowId: filter.workflow, status: filter.status, limit, cursor })}`, { signal }),
    PAGE,
  );

  const loadMore = () =>
    serial(async () => {
      more.disabled = true;
      try {
        await pages.more();
        error.textContent = "";
        draw();
      } finally {
        more.disabled = false;
      }
    });

  // Reads again as many executions as are shown (at least a page), from the newest.
  const refresh = () =>
    serial(async () => {
      await pages.refresh();
      error.textContent = "";
      draw();
    });

  function draw() {
    const { items, nextCursor } = pages;
    loaded = true;
    const keep = new Set(items.map((e) => e.executionId));
    for (const [id, row] of rows) {
      if (!keep.has(id)) {
        row.tr.remove();
        rows.delete(id);
      }
    }
    tbody.querySelector(".empty-row")?.remove();
    let at = tbody.firstElementChild;
    for (const e of items) {
      let row = rows.get(e.executionId);
      if (!row) {
        row = makeRow(e);
        rows.set(e.executionId, row);
      }
      updateRow(row, e);
      if (row.tr !== at) tbody.insertBefore(row.tr, at);
      else at = at.nextElementSibling;
    }
    if (!items.length) {
      tbody.append(
        h("tr", { class: "empty-row" }, h("td", { colspan: 6, class: "muted" }, "No executions match these filters.")),
      );
    }
    more.hidden = !nextCursor;
    setText(summary, `${items.length} execution${items.length === 1 ? "" : "s"} shown${nextCursor ? "; more below" : ""}.`);
  }

  const apply = () => {
    filter.workflow = workflowSelect.value;
    filter.status = statusSelect.value;
    pushUrl(consoleUrl("/executions", filter));
    pages.reset();
    for (const row of rows.values()) row.tr.remove();
    rows.clear();
    refresh().catch(showError);
  };
  workflowSelect.addEventListener("change", apply);
  statusSelect.addEventListener("change", apply);
  filters.addEventListener("submit", (e) => {
    e.preventDefault();
    apply();
  });
  more.addEventListener("click", () => loadMore().catch(showError));

  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
    if (!loaded) draw();
  }

  await refresh();
  poll(refresh, 2000, signal, showError);
}

function makeRow(e) {
  const status = statusBadge(e.status);
  const start = time(e.startAt);
  const dur = h("span", { class: "nums" });
  const tr = h(
    "tr",
    { dataset: { executionId: e.executionId } },
    h("td", { class: "id" }, executionLink(e.executionId)),
    h("td", {}, h("a", { href: consoleUrl("/executions", { workflow: e.workflowId }) }, e.workflowId)),
    h("td", {}, status),
    h("td", {}, start),
    h("td", { class: "hide-narrow" }, dur),
    h("td", { class: "hide-narrow" }, e.userId || h("span", { class: "muted" }, "—")),
  );
  return { tr, status, start, dur };
}

function updateRow(row, e) {
  setStatus(row.status, e.status);
  if (row.start.tagName === "TIME") setTime(row.start, e.startAt);
  const ms = e.endAt ? new Date(e.endAt) - new Date(e.startAt) : null;
  setText(row.dur, ms === null ? "—" : duration(ms));
}
