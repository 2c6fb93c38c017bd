// /console/logs?level=&agentId=&workflowId=&executionId=: the server's log records, live.
//
// The live tail is the WebSocket `/ws/logs` (the recent backlog first, then every new record).
// A browser cannot put an Authorization header on a WebSocket, so when the server is in strict
// mode (`/api/info`: `authentication.strict`, where the logs need a token) the console polls
// `GET /api/logs?since=<last record's time>` with the token instead.

import { api, query } from "../api.js";
import { strict } from "../auth.js";
import { consoleUrl, executionLink, h, replace, setText, time } from "../dom.js";
import { poll } from "../live.js";
import { pushUrl } from "../router.js";

const LEVELS = ["trace", "debug", "info", "warn", "error"];
const FILTERS = [
  ["agentId", "Agent id"],
  ["workflowId", "Workflow id"],
  ["executionId", "Execution id"],
];
const MAX_LINES = 1000;
const BACKLOG = 200;

export async function render({ main, query: params, signal, title }) {
  title("Logs");
  const filter = { level: params.get("level") || "" };
  for (const [key] of FILTERS) filter[key] = params.get(key) || "";

  const level = h(
    "select",
    { id: "log-level", name: "level" },
    h("option", { value: "" }, "any"),
    LEVELS.map((l) => h("option", { value: l, selected: l === filter.level }, `${l} and above`)),
  );
  const inputs = FILTERS.map(([key, label]) => [
    key,
    label,
    h("input", { id: `log-${key}`, name: key, type: "text", value: filter[key], autocomplete: "off", spellcheck: "false" }),
  ]);
  const pause = h("button", { type: "button", "aria-pressed": "false" }, "Pause");
  const clear = h("button", { type: "button" }, "Clear");
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter logs" },
    h("div", {}, h("label", { for: "log-level" }, "Level"), level),
    inputs.map(([key, label, input]) => h("div", {}, h("label", { for: `log-${key}` }, label), input)),
    h("button", { type: "submit", class: "primary" }, "Apply"),
    pause,
    clear,
  );
  const status = h("p", { class: "small muted", "aria-live": "polite" });
  const error = h("p", { class: "alert", role: "alert" });
  const list = h("ol", { class: "log-list", "aria-label": "Log records", tabindex: "0" });
  replace(main, h("h1", {}, "Logs"), form, status, error, list);

  // ---- Records ----
  let paused = false;
  let held = [];
  // Polling asks again from the newest record's millisecond (`since` is exclusive and records
  // share milliseconds), and skips the records of that millisecond it has already shown.
  let last = null; // the newest record's timestamp
  let shownAtLast = new Set(); // those records, as JSON

  function isNew(record) {
    const key = JSON.stringify(record);
    if (!record.timestamp || (last && record.timestamp < last)) return true;
    if (record.timestamp === last) {
      if (shownAtLast.has(key)) return false;
    } else {
      last = record.timestamp;
      shownAtLast = new Set();
    }
    shownAtLast.add(key);
    return true;
  }

  function add(record) {
    if (paused) {
      held.push(record);
      if (held.length > MAX_LINES) held = held.slice(-MAX_LINES);
      setText(pause, `Follow (${held.length} new)`);
      return;
    }
    const bottom = list.scrollHeight - list.scrollTop - list.clientHeight < 24;
    list.append(line(record));
    while (list.children.length > MAX_LINES) list.firstElementChild.remove();
    if (bottom) list.scrollTop = list.scrollHeight;
  }

  pause.addEventListener("click", () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    if (paused) {
      setText(pause, "Follow");
    } else {
      setText(pause, "Pause");
      const records = held;
      held = [];
      for (const r of records) add(r);
      list.scrollTop = list.scrollHeight;
    }
  });
  clear.addEventListener("click", () => {
    list.replaceChildren();
    held = [];
  });

  // ---- The source: a WebSocket, or polling in strict mode ----
  let source = null; // AbortController of the current connection
  function connect() {
    source?.abort();
    source = new AbortController();
    const stop = source.signal;
    signal.addEventListener("abort", () => source.abort(), { once: true });
    const filters = {};
    for (const key of ["level", ...FILTERS.map(([k]) => k)]) filters[key] = filter[key];
    if (strict()) pollLogs(filters, stop);
    else openSocket(filters, stop);
  }

  function pollLogs(filters, stop) {
    setText(status, "Polling GET /api/logs every 2 s (strict mode: the logs need your token).");
    let first = true;
    const fetchNew = async () => {
      const since = last ? new Date(Date.parse(last) - 1).toISOString() : undefined;
      const q = first ? { ...filters, limit: BACKLOG } : { ...filters, since, limit: 1000 };
      const records = await api(`/api/logs${query(q)}`, { signal: stop });
      if (stop.aborted) return;
      first = false;
      error.textContent = "";
      for (const r of records) if (isNew(r)) add(r);
    };
    const showError = (e) => {
      if (stop.aborted) return;
      error.textContent = e.message;
      // Refused (no token, or not an admin in strict mode): asking again will not help.
      if (e.status === 401 || e.status === 403) {
        source.abort();
        setText(status, "Not following: the server refused the logs.");
      }
    };
    fetchNew().catch(showError);
    poll(fetchNew, 2000, stop, showError);
  }

  function openSocket(filters, stop, attempt = 0) {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}/ws/logs${query({ ...filters, limit: BACKLOG })}`);
    let opened = false;
    setText(status, "Connecting…");
    stop.addEventListener("abort", () => ws.close(1000), { once: true });
    ws.addEventListener("open", () => {
      opened = true;
      error.textContent = "";
      setText(status, "Live: following /ws/logs.");
    });
    ws.addEventListener("message", (event) => {
      let msg;
      try {
        msg = JSON.parse(event.data);
      } catch {
        return;
      }
      if (msg.type === "log") add(msg);
      else if (msg.type === "lagged") add({ level: "warn", target: "console", message: `Missed ${msg.missed} records (too slow to keep up).`, fields: {} });
    });
    ws.addEventListener("close", (event) => {
      if (stop.aborted) return;
      const wait = Math.min(30000, 1000 * 2 ** attempt);
      setText(status, `Disconnected${event.reason ? ` (${event.reason})` : ""}; reconnecting in ${Math.round(wait / 1000)} s…`);
      setTimeout(() => {
        if (!stop.aborted) openSocket({ ...filters }, stop, opened ? 0 : attempt + 1);
      }, wait);
    });
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    filter.level = level.value;
    for (const [key, , input] of inputs) filter[key] = input.value.trim();
    pushUrl(consoleUrl("/logs", filter));
    list.replaceChildren();
    held = [];
    last = null;
    shownAtLast = new Set();
    connect();
  });

  connect();
}

/** One record as a line: time, level, target, message, fields and ids. */
function line(r) {
  const fields = Object.entries(r.fields || {})
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  return h(
    "li",
    {},
    r.timestamp ? time(r.timestamp) : null,
    h("span", { class: `lvl lvl-${r.level}` }, r.level),
    h("span", { class: "target" }, r.target),
    h("span", { class: "msg-text" }, r.message, fields ? h("span", { class: "muted" }, ` ${fields}`) : null),
    r.agentId || r.workflowId || r.executionId
      ? h(
          "span",
          { class: "ids" },
          r.agentId ? h("a", { href: `/console/agents/${encodeURIComponent(r.agentId)}` }, r.agentId) : null,
          r.workflowId ? [" ", h("a", { href: consoleUrl("/executions", { workflow: r.workflowId }) }, r.workflowId)] : null,
          r.executionId ? [" ", executionLink(r.executionId)] : null,
        )
      : null,
  );
}
