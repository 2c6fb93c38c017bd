// The console's only way to the server: agentry's public HTTP API, with the access token of the
// browser session (if any) as `Authorization: Bearer`. Every answer is the envelope
// `{success: true, data}` / `{success: false, error, code}`; `api()` gives `data` or throws an
// `ApiError` carrying the server's own message.

const TOKEN_KEY = "agentry.console.token";

/**
 * A refused or failed call: the HTTP status (0 when the server was not reached), message, code
 * and, when the answer names one (`X-Execution-Id`: a run that failed or goes on), the execution.
 */
export class ApiError extends Error {
  constructor(status, message, code, executionId) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.executionId = executionId;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

let unauthorizedHandler = () => {};

/** Called with the server's message whenever a call is refused with 401. */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

/** The request headers of a call: JSON, and the token when there is one. */
export function headers(extra = {}, token = getToken()) {
  const h = { Accept: "application/json", ...extra };
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

/**
 * A raw `fetch` of the API with the session's token. `body` (any JSON value) is sent as JSON.
 * Options: `method`, `body`, `signal`, `headers`, `token` (instead of the session's),
 * `quiet401` (do not raise the "sign in again" banner: the caller shows the refusal itself).
 * Resolves to the Response when it is a success (2xx), else throws an ApiError.
 */
export async function request(path, options = {}) {
  const init = {
    method: options.method || "GET",
    headers: headers(options.headers, options.token ?? getToken()),
    signal: options.signal,
    cache: "no-store",
  };
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, `The server did not answer (${e.message})`);
  }
  if (response.ok) return response;
  const failure = await failureOf(response);
  if (response.status === 401 && !options.quiet401) unauthorizedHandler(failure.message);
  throw failure;
}

/** The ApiError of a failed response, with the envelope's message when there is one. */
async function failureOf(response) {
  let message = `${response.status} ${response.statusText || "error"}`;
  let code;
  try {
    const body = await response.json();
    if (body && typeof body.error === "string") message = body.error;
    code = body && body.code;
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiError(response.status, message, code, response.headers.get("X-Execution-Id") || undefined);
}

/**
 * The server's readiness (`GET /readyz`, a probe's small body outside the envelope):
 * `{status: "ready"}` or `{status: "not_ready", reason, detail}`.
 */
export async function readiness(signal) {
  try {
    const response = await fetch("/readyz", { signal, cache: "no-store" });
    return await response.json();
  } catch (e) {
    if (e.name === "AbortError") throw e;
    return { status: "not_ready", reason: "unreachable", detail: e.message };
  }
}

/** Calls the API and gives the envelope's `data` (see `request` for the options). */
export async function api(path, options = {}) {
  const response = await request(path, options);
  const body = await response.json();
  if (!body || body.success !== true) {
    throw new ApiError(response.status, (body && body.error) || "Unexpected answer");
  }
  // The status matters to a few callers (a suspend answers 202 while still pending).
  if (options.withStatus) return { status: response.status, data: body.data };
  return body.data;
}

/** `encodeURIComponent` for path segments. */
export const seg = encodeURIComponent;

/** The query string of an object (empty values left out), with its `?`. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, v);
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

/**
 * A list read page by page with the API's cursor; `fetchPage(cursor, limit)` answers one page,
 * whose items are its `field` (`executions`, `runs`), each named by its `key`. `more()` appends
 * the next page (leaving out any already shown); `refresh()` reads again as many as are shown
 * (at least a page), from the newest; `reset()` forgets them.
 */
export function cursorPages(fetchPage, pageSize, field, key) {
  const pages = {
    items: [],
    nextCursor: null,
    async more() {
      const page = await fetchPage(pages.nextCursor, pageSize);
      const seen = new Set(pages.items.map((e) => e[key]));
      pages.items = pages.items.concat(page[field].filter((e) => !seen.has(e[key])));
      pages.nextCursor = page.nextCursor;
    },
    async refresh() {
      const want = Math.max(pageSize, pages.items.length);
      const fresh = [];
      let cursor = null;
      do {
        const page = await fetchPage(cursor, Math.min(100, Math.max(pageSize, want - fresh.length)));
        fresh.push(...page[field]);
        cursor = page.nextCursor;
      } while (cursor && fresh.length < want);
      pages.items = fresh;
      pages.nextCursor = cursor;
    },
    reset() {
      pages.items = [];
      pages.nextCursor = null;
    },
  };
  return pages;
}

/** Executions (`GET /executions`) page by page: see `cursorPages`. */
export function executionPages(fetchPage, pageSize) {
  return cursorPages(fetchPage, pageSize, "executions", "executionId");
}

/** Durable agent runs (`GET /agent-runs`, `GET /agents/{id}/runs`) page by page. */
export function runPages(fetchPage, pageSize) {
  return cursorPages(fetchPage, pageSize, "runs", "runId");
}

// ---- Cached reads of things that do not change while the server runs ---------------------------

const cache = new Map();

/** GET once per page load (the registry of workflows and agents is fixed for a server's life). */
export function cached(path) {
  if (!cache.has(path)) {
    const p = api(path).catch((e) => {
      cache.delete(path);
      throw e;
    });
    cache.set(path, p);
  }
  return cache.get(path);
}

/** A workflow's detail (steps and schemas), cached. */
export function workflowDetail(id) {
  return cached(`/workflows/${seg(id)}`);
}
