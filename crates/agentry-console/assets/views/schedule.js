// /console/schedules/{id}: one schedule: its definition, its next fire times, the tick waiting
// under buffer-one, its skip count, Pause / Unpause and Trigger, and its recent fires, each a
// link to its execution with the execution's status now. Kept live (every two seconds while the
// tab is visible).

import { api, seg } from "../api.js";
import { consoleUrl, executionLink, facts, h, jsonDetails, replace, statusBadge, time } from "../dom.js";
import { poll } from "../live.js";
import { scheduleActions } from "./schedules.js";

export async function render({ main, params, signal, title }) {
  const id = params.id;
  title(`Schedule ${id}`);
  const body = h("div");
  const error = h("p", { class: "alert", role: "alert" });
  replace(
    main,
    h("p", { class: "small" }, h("a", { href: consoleUrl("/schedules") }, "← Schedules")),
    h("div", { class: "page-head" }, h("h1", {}, "Schedule ", h("span", { class: "mono" }, id))),
    error,
    body,
  );
  let shown = "";

  async function refresh() {
    const s = await api(`/schedules/${seg(id)}`, { signal });
    if (signal.aborted) return;
    error.textContent = "";
    const key = JSON.stringify(s);
    if (key === shown) return;
    shown = key;
    draw(s);
  }

  function draw(s) {
    replace(
      body,
      facts([
        ["Workflow", h("code", {}, s.workflowId)],
        ["Cron", h("span", {}, h("code", {}, s.cron), " in ", s.timezone)],
        ["State", statusBadge(s.paused ? "paused" : "active")],
        ["Overlap", s.overlap],
        ["Catch-up window", s.catchupWindow],
        ["Next fires", s.nextFires.length ? h("span", {}, s.nextFires.map((t, i) => [i ? ", " : "", time(t)])) : "none (paused)"],
        ["Waiting tick", s.buffered ? time(s.buffered) : undefined],
        ["Skipped ticks", String(s.skipped)],
        ["Owner", s.owner ? h("code", {}, s.owner) : undefined],
        ["Declared by the host", s.declared ? "yes" : undefined],
      ]),
      jsonDetails("Input", s.input),
      scheduleActions(s, refresh, showError),
      h(
        "section",
        { "aria-labelledby": "fires-title" },
        h("h2", { id: "fires-title" }, "Recent fires"),
        s.fires.length
          ? h(
              "div",
              { class: "table-wrap" },
              h(
                "table",
                { "aria-label": "Recent fires" },
                h(
                  "thead",
                  {},
                  h(
                    "tr",
                    {},
                    h("th", { scope: "col" }, "Fire time"),
                    h("th", { scope: "col" }, "Origin"),
                    h("th", { scope: "col" }, "Execution"),
                    h("th", { scope: "col" }, "Status"),
                  ),
                ),
                h(
                  "tbody",
                  {},
                  s.fires.map((f) =>
                    h(
                      "tr",
                      {},
                      h("td", {}, time(f.fireTime)),
                      h("td", {}, f.origin),
                      h("td", {}, f.status === "pending" || f.status === "failed" ? h("code", {}, f.executionId) : executionLink(f.executionId)),
                      h("td", {}, statusBadge(f.status), f.error ? h("span", { class: "small muted" }, " ", f.error) : null),
                    ),
                  ),
                ),
              ),
            )
          : h("p", { class: "muted" }, "It has not fired yet."),
      ),
    );
  }

  function showError(e) {
    if (e.name === "AbortError" || signal.aborted) return;
    error.textContent = e.message;
  }

  await refresh();
  poll(refresh, 2000, signal, showError);
}
