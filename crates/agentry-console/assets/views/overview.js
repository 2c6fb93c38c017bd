// /console: the workflows with their executions by status (each count a link to the filtered
// list), the agents, the other views, and what the server is.

import { api, readiness } from "../api.js";
import { consoleUrl, h, replace, setText } from "../dom.js";
import { serverInfo } from "../info.js";
import { poll } from "../live.js";
import { STATUSES } from "./executions.js";

export async function render({ main, signal, title }) {
  title("Overview");
  const [workflows, agents, counts, ready] = await Promise.all([
    api("/workflows", { signal }),
    api("/agents", { signal }),
    api("/api/execution-counts", { signal }),
    readiness(signal),
  ]);
  const info = serverInfo();

  // Count cells, by workflow and status, updated in place while the page is open.
  const cells = new Map();
  const rows = workflows.map((w) => {
    const byStatus = new Map();
    cells.set(w.id, byStatus);
    return h(
      "tr",
      {},
      h(
        "td",
        {},
        h("a", { href: consoleUrl("/executions", { workflow: w.id }) }, w.name),
        h("div", { class: "small muted mono" }, w.id),
      ),
      h("td", { class: "hide-narrow small" }, w.purpose),
      STATUSES.map((s) => {
        const link = h(
          "a",
          {
            href: consoleUrl("/executions", { workflow: w.id, status: s }),
            "aria-label": `${w.id}: ${s}`,
          },
          "0",
        );
        byStatus.set(s, link);
        return h("td", { class: "num counts" }, link);
      }),
    );
  });

  const update = (data) => {
    for (const { workflowId, counts: c } of data.workflows) {
      const byStatus = cells.get(workflowId);
      if (!byStatus) continue;
      for (const s of STATUSES) {
        const link = byStatus.get(s);
        setText(link, c[s] ?? 0);
        link.classList.toggle("zero", !c[s]);
      }
    }
  };
  update(counts);

  // Readiness as an orchestrator sees it (`/readyz`): the database answers, migrations are
  // applied, the server is not draining.
  const readyBadge = h("span", { class: "status", id: "readiness" });
  const showReady = (r) => {
    const ok = r.status === "ready";
    setText(readyBadge, ok ? "ready" : `not ready: ${r.reason}`);
    readyBadge.className = `status ${ok ? "status-completed" : "status-error"}`;
    readyBadge.title = ok ? "GET /readyz: ready" : `GET /readyz: ${r.detail || r.reason}`;
  };
  showReady(ready);

  replace(
    main,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Overview"),
      h("p", { class: "muted" }, `agentry ${info.version} · database ${info.database} · `, readyBadge),
    ),
    h(
      "nav",
      { class: "filters", "aria-label": "Views" },
      h("a", { class: "button", href: "/console/executions" }, "All executions"),
      h("a", { class: "button", href: "/console/approvals" }, "Approvals"),
      h("a", { class: "button", href: "/console/queues" }, "Queues"),
      h("a", { class: "button", href: "/console/agents" }, "Agents"),
      h("a", { class: "button", href: "/console/logs" }, "Logs"),
      h("a", { class: "button", href: "/ui" }, "API explorer"),
    ),
    h("h2", { id: "workflows-title" }, "Workflows"),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { "aria-labelledby": "workflows-title" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Workflow"),
            h("th", { scope: "col", class: "hide-narrow" }, "Purpose"),
            STATUSES.map((s) => h("th", { scope: "col", class: "num" }, s)),
          ),
        ),
        h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: STATUSES.length + 2, class: "muted" }, "No workflows registered."))),
      ),
    ),
    h("h2", { id: "agents-title" }, "Agents"),
    agentList(agents),
  );

  poll(async () => {
    update(await api("/api/execution-counts", { signal }));
    showReady(await readiness(signal));
  }, 5000, signal);
}

/** The agents as a list of links with their description, model and tools. */
export function agentList(agents) {
  if (!agents.length) return h("p", { class: "muted" }, "No agents registered.");
  return h(
    "ul",
    { class: "grid plain", "aria-labelledby": "agents-title" },
    agents.map((a) =>
      h(
        "li",
        { class: "card" },
        h("h3", {}, h("a", { href: `/console/agents/${encodeURIComponent(a.id)}` }, a.name)),
        h("p", { class: "small" }, a.description),
        h(
          "p",
          { class: "small muted" },
          `model ${a.model}`,
          a.tools.length ? ` · tools: ${a.tools.join(", ")}` : " · no tools",
          a.memory ? " · memory" : "",
        ),
      ),
    ),
  );
}
