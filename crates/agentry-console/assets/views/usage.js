// The token usage section of an agent's page (`GET /agents/{id}/usage`): what the agent's model
// calls spent for a user today and on the days before, beside the agent's daily budget (a user
// beyond it is refused with 429 budget_exceeded until midnight UTC). With authentication on,
// the signed-in user's usage is shown (the user id left empty); the server refuses another
// user's. The chat of the same page talks as the user `console` (or the signed-in user).

import { api, query, seg } from "../api.js";
import { enabled } from "../auth.js";
import { h, replace, setText, time } from "../dom.js";

/** The usage section of `agent`. */
export function tokenUsage(agent, signal) {
  const userInput = h("input", {
    id: "usage-user",
    name: "userId",
    autocomplete: "off",
    value: enabled() ? "" : "console",
    placeholder: enabled() ? "you (signed in)" : "anonymous",
  });
  const summary = h("p", { id: "usage-today", "aria-live": "polite" });
  const days = h("div", {});
  const error = h("p", { class: "alert", role: "alert" });

  function show(usage) {
    const budget = usage.tokensPerUserDay;
    replace(
      summary,
      `Today (${usage.today}): ${usage.todayTokens} tokens`,
      budget === null || budget === undefined
        ? " · no daily budget"
        : [` of ${budget} · ${usage.remainingToday} left · resets `, time(usage.resetsAt)],
    );
    replace(
      days,
      usage.days.length
        ? h(
            "table",
            { "aria-label": "Tokens per day" },
            h("thead", {}, h("tr", {}, h("th", {}, "Day"), h("th", {}, "Tokens"))),
            h("tbody", {}, usage.days.map((d) => h("tr", {}, h("td", {}, d.day), h("td", {}, String(d.tokens))))),
          )
        : h("p", { class: "small muted" }, "No tokens spent in the last 7 days."),
    );
  }

  const load = async () => {
    setText(error, "");
    try {
      const path = `/agents/${seg(agent.id)}/usage${query({ userId: userInput.value.trim(), days: "7" })}`;
      show(await api(path, { signal, quiet401: true }));
    } catch (e) {
      if (e.name !== "AbortError") setText(error, e.message);
    }
  };

  const form = h(
    "form",
    { class: "inline-form", "aria-label": "Whose token usage", onsubmit: (e) => (e.preventDefault(), load()) },
    h("div", { class: "field" }, h("label", { for: "usage-user" }, "User id"), userInput),
    h("div", { class: "form-actions" }, h("button", { type: "submit" }, "Show usage")),
  );
  load();
  return h("section", { "aria-labelledby": "usage-title" }, h("h2", { id: "usage-title" }, "Token usage"), form, error, summary, days);
}
