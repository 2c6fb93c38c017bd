// Small DOM helpers. Every piece of data is put into the page as text (never as HTML): the
// API's data is the user's data, and the page's Content-Security-Policy forbids inline script.

/**
 * Builds an element: `h("a", {href: "/x", class: "y"}, "text", child)`.
 * Attributes: `class`, `text`, `on<event>` (a listener), booleans (present when true), anything
 * else with setAttribute. `null`/`undefined`/`false` attributes and children are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "text") {
      el.textContent = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (nodes, strings, numbers, nested arrays), skipping empty ones. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Sets an element's text only when it changed (no needless re-layout while polling). */
export function setText(el, text) {
  const value = String(text ?? "");
  if (el.textContent !== value) el.textContent = value;
}

/**
 * A point in time in the browser's zone, with the ISO value in `datetime` and on hover.
 * `null` gives an em dash.
 */
export function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: iso }, formatTime(iso));
}

/** Updates a `<time>` made by `time()` in place. */
export function setTime(el, iso) {
  if (el.getAttribute("datetime") === iso) return;
  el.setAttribute("datetime", iso);
  el.setAttribute("title", iso);
  el.textContent = formatTime(iso);
}

export function formatTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** A duration in ms as people read it: `850 ms`, `2.4 s`, `3 min 5 s`, `2 h 4 min`. */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.floor(s % 60)} s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours} h ${m % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** A status badge: `<span class="status status-running">running</span>`. */
export function statusBadge(status) {
  return h("span", { class: `status status-${status}`, dataset: { status } }, status);
}

/** Updates a badge made by `statusBadge` in place. */
export function setStatus(el, status) {
  if (el.dataset.status === status) return;
  el.dataset.status = status;
  el.className = `status status-${status}`;
  el.textContent = status;
}

/** Pretty JSON text. */
export function json(value) {
  return JSON.stringify(value, null, 2) ?? "undefined";
}

/** A collapsible JSON value: `<details><summary>label</summary><pre>…</pre></details>`. */
export function jsonDetails(label, value, open = false) {
  return h("details", { open }, h("summary", {}, label), h("pre", {}, json(value)));
}

/** A `<pre>` of JSON. */
export function jsonBlock(value) {
  return h("pre", {}, json(value));
}

/** A definition list from `[term, description]` pairs (pairs with an undefined value skipped). */
export function facts(pairs) {
  const dl = h("dl", { class: "facts" });
  for (const [term, value] of pairs) {
    if (value === undefined) continue;
    dl.append(h("dt", {}, term), append(h("dd"), [value]));
  }
  return dl;
}

/** The URL of a console view, with a query from an object (empty values left out). */
export function consoleUrl(path, query = {}) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "") params.set(k, v);
  }
  const qs = params.toString();
  return `/console${path}${qs ? `?${qs}` : ""}`;
}

/** A link to one execution's page. */
export function executionLink(id, text = id) {
  return h("a", { href: consoleUrl(`/executions/${encodeURIComponent(id)}`), class: "mono" }, text);
}

/** A random id for client-side things (conversation ids, chat message ids). */
export function randomId(prefix) {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
