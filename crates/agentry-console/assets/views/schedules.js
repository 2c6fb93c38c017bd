// /console/schedules: every schedule, by id: its workflow, its cron expression and time zone,
// whether it is paused, its next fire, its last fire (a link to the execution, with its status)
// and its skip count, with Pause / Unpause and Trigger. Kept live (read again every three
// seconds while the tab is visible); a row is redrawn only when its schedule changed.

import { api, seg } from "../api.js";
import { consoleUrl, executionLink, h, replace, setText, statusBadge, time } from "../dom.js";
import { poll } from "../live.js";

export async function render({ main, signal, title }) {
  title("Schedules");
  const tbody = h("tbody");
  const count = h("p", { class: "muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  replace(
    main,
    h("div", { class: "page-head" }, h("h1", {}, "Schedules"), count),
    h("p", {}, "Workflows started on a cron expression. Each fire is an execution named after its schedule and its time."),
    error,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-label": "Schedules" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Schedule"),
            h("th", { scope: "col" }, "Workflow"),
            h("th", { scope: "col" }, "When"),
            h("th", { scope: "col" }, "State"),
            h("th", { scope: "col" }, "Next fire"),
            h("th", { scope: "col" }, "Last fire"),
            h("th", { scope: "col", class: "hide-narrow" }, "Skipped"),
            h("th", { scope: "col" }, "Actions"),
          ),
        ),
        tbody,
      ),
    ),
  );

  const rows = new Map(); // id -> {tr, key}

  async function refresh() {
    const { schedules } = await api("/schedules", { signal });
    if (signal.aborted) return;
    error.textContent = "";
    setText(count, `${schedules.length} schedule${schedules.length === 1 ? "" : "s"}`);
    const keep = new Set(schedules.map((s) => s.id));
    for (const [id, row] of rows) {
      if (!keep.has(id)) {
        row.tr.remove();
        rows.delete(id);
      }
    }
    tbody.querySelector(".empty-row")?.remove();
    let at = tbody.firstElementChild;
    for (const s of schedules) {
      const key = JSON.stringify(s);
      let row = rows.get(s.id);
      if (!row || row.key !== key) {
        const tr = scheduleRow(s, () => refresh().catch(showError), showError);
        if (row) row.tr.replaceWith(tr);
        row = { tr, key };
        rows.set(s.id, row);
      }
      if (row.tr !== at) tbody.insertBefore(row.tr, at);
      else at = at.nextElementSibling;
    }
    if (!schedules.length) {
      tbody.append(h("tr", { class: "empty-row" }, h("td", { colspan: 8, class: "muted" }, "No schedule yet.")));
    }
  }

  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  await refresh();
  poll(refresh, 3000, signal, showError);
}

/** A schedule's row, with its actions; `changed()` reads the list again after one. */
function scheduleRow(s, changed, showError) {
  const last = s.fires[0];
  return h(
    "tr",
    { dataset: { scheduleId: s.id } },
    h("td", {}, h("a", { href: consoleUrl(`/schedules/${encodeURIComponent(s.id)}`), class: "mono" }, s.id)),
    h("td", {}, h("code", {}, s.workflowId)),
    h("td", {}, h("code", {}, s.cron), " ", h("span", { class: "small muted" }, s.timezone)),
    h("td", {}, statusBadge(s.paused ? "paused" : "active")),
    h("td", {}, s.nextFires.length ? time(s.nextFires[0]) : h("span", { class: "muted" }, "—")),
    h("td", {}, last ? [executionLink(last.executionId), " ", statusBadge(last.status)] : h("span", { class: "muted" }, "never")),
    h("td", { class: "hide-narrow" }, String(s.skipped)),
    h("td", {}, scheduleActions(s, changed, showError)),
  );
}

/** Pause or Unpause, and Trigger (a fire now, also when paused). */
export function scheduleActions(s, changed, showError) {
  const act = (label, path) => {
    const button = h("button", { type: "button", class: "small-button" }, label);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await api(`/schedules/${seg(s.id)}/${path}`, { method: "POST" });
        await changed();
      } catch (e) {
        showError(e);
      } finally {
        button.disabled = false;
      }
    });
    return button;
  };
  return h(
    "div",
    { class: "row-actions", role: "group", "aria-label": `Actions of ${s.id}` },
    s.paused ? act("Unpause", "unpause") : act("Pause", "pause"),
    " ",
    act("Trigger", "trigger"),
  );
}
