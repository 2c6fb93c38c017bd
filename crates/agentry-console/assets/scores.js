// Live scores of an agent's generations (GET /agents/{id}/scores, and a durable run's
// `scores`): a table of scorer, value, verdict and reason; on the agent's page also each
// scorer's mean over the scores shown, a scorer filter and "Load more".

import { api, cursorPages, query, seg } from "./api.js";
import { h, replace, time } from "./dom.js";
import { runLink } from "./runs.js";

const PAGE = 25;

/** A score's value as text (three decimals). */
function valueText(v) {
  return typeof v === "number" ? v.toFixed(3) : "—";
}

function verdict(score) {
  return h("span", { class: `status ${score.passed ? "status-completed" : "status-error"}` }, score.passed ? "passed" : "failed");
}

/** The table of `scores`; `agentId` links each row's run (its durable run, when it is one). */
export function scoreTable(scores, { agentId, label, showRun = true }) {
  const run = (id) => (id.startsWith("gen_") ? h("code", { title: "a generation held in memory" }, id) : runLink(agentId, id));
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { "aria-label": label },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          showRun ? h("th", { scope: "col" }, "Run") : null,
          h("th", { scope: "col" }, "Scorer"),
          h("th", { scope: "col" }, "Value"),
          h("th", { scope: "col" }, "Verdict"),
          h("th", { scope: "col", class: "hide-narrow" }, "Reason"),
          showRun ? h("th", { scope: "col", class: "hide-narrow" }, "Scored") : null,
        ),
      ),
      h(
        "tbody",
        {},
        scores.map((s) =>
          h(
            "tr",
            { "data-scorer": s.scorer },
            showRun ? h("td", {}, run(s.runId)) : null,
            h("td", {}, h("code", {}, s.scorer)),
            h("td", { class: "nums" }, valueText(s.value)),
            h("td", {}, verdict(s)),
            h("td", { class: "hide-narrow" }, s.reason),
            showRun ? h("td", { class: "hide-narrow" }, time(s.createdAt)) : null,
          ),
        ),
      ),
    ),
  );
}

/** Each scorer's mean over `scores`, as `scorer mean (n)` items. */
function means(scores) {
  const by = new Map();
  for (const s of scores) {
    const m = by.get(s.scorer) || { sum: 0, n: 0 };
    m.sum += s.value;
    m.n += 1;
    by.set(s.scorer, m);
  }
  return [...by.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([scorer, m]) => h("li", { "data-scorer": scorer }, h("code", {}, scorer), ` ${valueText(m.sum / m.n)} `, h("span", { class: "muted" }, `(${m.n})`)));
}

/** The section of `agent`'s recent live scores on its page. */
export function agentScores(agent, signal) {
  const scorer = h("input", { id: "scores-scorer", name: "scorer", type: "text", placeholder: "any scorer", autocomplete: "off" });
  const summary = h("ul", { class: "plain inline", "aria-label": "Mean by scorer" });
  const body = h("div");
  const total = h("p", { class: "small muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const refresh = h("button", { type: "button" }, "Refresh");
  let shownTotal = 0;
  // A score is named by its run and scorer (`cursorPages` leaves out those already shown).
  const fetchPage = async (cursor, limit) => {
    const page = await api(`/agents/${seg(agent.id)}/scores${query({ scorer: scorer.value.trim(), limit, cursor })}`, { signal });
    page.scores.forEach((s) => (s.key = `${s.runId}/${s.scorer}`));
    shownTotal = page.total;
    return page;
  };
  const list = cursorPages(fetchPage, PAGE, "scores", "key");

  function draw() {
    const items = list.items;
    replace(summary, means(items));
    replace(
      body,
      items.length
        ? scoreTable(items, { agentId: agent.id, label: "Scores" })
        : h("p", { class: "muted" }, "No scores yet: scorers score a sample of this agent's generations after each answer."),
    );
    total.textContent = `${items.length} of ${shownTotal} scores`;
    more.hidden = !list.nextCursor;
  }
  async function load(how) {
    error.textContent = "";
    try {
      await how();
      draw();
    } catch (e) {
      if (signal.aborted) return;
      error.textContent = `Could not read the scores: ${e.message}`;
    }
  }
  more.addEventListener("click", () => load(() => list.more()));
  refresh.addEventListener("click", () => load(() => list.refresh()));
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter scores" },
    h("div", {}, h("label", { for: "scores-scorer" }, "Scorer"), scorer),
    h("div", {}, h("button", { type: "submit" }, "Filter"), refresh),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    list.reset();
    load(() => list.more());
  });
  load(() => list.more());
  return h(
    "section",
    { "aria-labelledby": "scores-title" },
    h("h2", { id: "scores-title" }, "Scores"),
    h("p", { class: "small muted" }, "Live scores of this agent's generations, newest first."),
    form,
    error,
    summary,
    body,
    total,
    more,
  );
}
