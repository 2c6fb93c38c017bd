// /console/agents/<id>: an agent's detail (model, tools, sub-agents, memory, guardrails,
// fallbacks, budgets), its working memory (when it keeps one), a chat with it, its durable runs
// (`?status=` filters them), its live scores and its token usage.

import { api, seg } from "../api.js";
import { chat } from "../chat.js";
import { facts, h, json, replace } from "../dom.js";
import { agentScores } from "../scores.js";
import { runList } from "./agent-runs.js";
import { tokenUsage } from "./usage.js";
import { workingMemory } from "./working-memory.js";

export async function render({ main, params, query, signal, title }) {
  const agent = await api(`/agents/${seg(params.id)}`, { signal });
  title(agent.name);
  const list = (items, empty) =>
    items.length ? h("ul", { class: "plain" }, items.map((i) => h("li", {}, i))) : h("span", { class: "muted" }, empty);
  replace(
    main,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, agent.name),
      h("p", { class: "muted" }, h("a", { href: "/console/agents" }, "All agents")),
    ),
    h("p", {}, agent.description),
    facts([
      ["Id", h("code", {}, agent.id)],
      ["Model", h("code", {}, agent.model)],
      ["Tools", list(agent.tools.map((t) => h("code", {}, t)), "none")],
      [
        "Sub-agents",
        list(
          agent.subAgents.map((s) =>
            h("span", {}, h("a", { href: `/console/agents/${encodeURIComponent(s.id)}` }, s.name || s.id), s.description ? ` · ${s.description}` : ""),
          ),
          "none",
        ),
      ],
      ["Memory", agent.memory ? h("pre", {}, json(agent.memory.config)) : h("span", { class: "muted" }, "none: every call stands alone")],
      ["Telemetry", agent.isTelemetryEnabled ? "on" : "off"],
      [
        "Guardrails",
        agent.guardrails
          ? h(
              "span",
              { "data-testid": "guardrails" },
              ["input", "output", "tool"]
                .filter((p) => agent.guardrails[p].length)
                .map((p, i) => [i ? " · " : "", `${p}: `, agent.guardrails[p].map((g, j) => [j ? ", " : "", h("code", {}, g)])]),
            )
          : h("span", { class: "muted" }, "none"),
      ],
      ["Fallback models", list((agent.fallbackModels || []).map((m) => h("code", {}, m)), "none")],
      [
        "Budget",
        agent.budget
          ? h(
              "span",
              { "data-testid": "budget" },
              [
                agent.budget.tokensPerRun != null ? `${agent.budget.tokensPerRun} tokens per run` : null,
                agent.budget.tokensPerUserDay != null ? `${agent.budget.tokensPerUserDay} tokens per user per day` : null,
              ]
                .filter(Boolean)
                .join(" · "),
            )
          : h("span", { class: "muted" }, "none"),
      ],
      [
        "Live scoring",
        agent.liveScoring
          ? h(
              "span",
              { "data-testid": "live-scoring" },
              agent.liveScoring.scorers.map((s, i) => [i ? ", " : "", h("code", {}, s)]),
              ` · ${Math.round(agent.liveScoring.sampleRate * 100)}% of generations`,
            )
          : h("span", { class: "muted" }, "none"),
      ],
    ]),
    workingMemory(agent, signal),
    chat(agent, signal),
    runList(agent, query, signal),
    agentScores(agent, signal),
    tokenUsage(agent, signal),
  );
}
