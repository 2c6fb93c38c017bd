// Signing in: when the server has an authentication provider (`GET /api/info`), the console
// asks for an access token once, checks it with `GET /api/me`, keeps it for the browser session
// (sessionStorage) and sends it on every call. A refusal (401) anywhere shows the server's
// message in a banner with a way to sign in again.

import { ApiError, api, clearToken, getToken, onUnauthorized, setToken } from "./api.js";
import { h, replace } from "./dom.js";

let info = null;
let afterSignIn = () => {};
let beforeSignIn = () => {};

/**
 * Sets up authentication for the server described by `serverInfo` (`/api/info`'s data).
 * `hooks.ready()` renders the console once a token is known (or none is needed);
 * `hooks.stop()` stops the current view before the sign-in form replaces it.
 * Resolves once the first state is shown.
 */
export async function init(serverInfo, hooks) {
  info = serverInfo;
  afterSignIn = hooks.ready;
  beforeSignIn = hooks.stop;
  onUnauthorized(showBanner);
  if (!enabled()) {
    renderSession(null);
    afterSignIn();
    return;
  }
  const token = getToken();
  if (!token) {
    showSignIn();
    return;
  }
  try {
    const me = await api("/api/me", { quiet401: true });
    renderSession(me.user);
    afterSignIn();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      clearToken();
      showSignIn(e.message);
    } else {
      throw e;
    }
  }
}

/** Whether the server asks for tokens. */
export function enabled() {
  return Boolean(info && info.authentication && info.authentication.enabled);
}

/** Whether the server is in strict mode (every sensitive route needs a token). */
export function strict() {
  return Boolean(info && info.authentication && info.authentication.strict);
}

/** The sign-in form, in place of the current view; `message` is a refusal to show. */
export function showSignIn(message) {
  beforeSignIn();
  hideBanner();
  renderSession(null);
  document.title = "Sign in · agentry console";
  const main = document.getElementById("main");
  const input = h("input", {
    id: "access-token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "token-hint",
  });
  const alert = h("p", { class: "alert", role: "alert", id: "sign-in-error" }, message || "");
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    { class: "card sign-in", "aria-labelledby": "sign-in-title" },
    h("div", { class: "field" }, h("label", { for: "access-token" }, "Access token"), input),
    h(
      "p",
      { class: "hint small muted", id: "token-hint" },
      "A token of this server's provider (for the JWT provider: ",
      h("code", {}, "agentry token --sub <you> --expires-in 8h"),
      "). It is kept for this browser tab's session only.",
    ),
    h("div", { class: "form-actions" }, button),
    alert,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    button.disabled = true;
    alert.textContent = "";
    try {
      const me = await api("/api/me", { token, quiet401: true });
      setToken(token);
      renderSession(me.user);
      afterSignIn();
    } catch (e) {
      // The token is not kept: the server refused it (or could not be asked).
      alert.textContent = refusal(e);
      input.setAttribute("aria-invalid", "true");
      input.focus();
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
  replace(
    main,
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h("p", {}, "This server asks for an access token (", h("code", {}, "Authorization: Bearer"), ")."),
    form,
  );
  input.focus();
}

/** How a refusal reads: the server's message, named as a refusal. */
function refusal(e) {
  if (e instanceof ApiError && e.status === 401) return `Refused: ${e.message}`;
  return e.message || String(e);
}

/** The banner of a 401 during use: the server's message and "Sign in again". */
function showBanner(message) {
  if (!enabled()) return;
  const banner = document.getElementById("banner");
  replace(
    banner,
    h("span", {}, h("strong", {}, "Not authorized: "), message),
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          clearToken();
          showSignIn();
        },
      },
      "Sign in again",
    ),
  );
  banner.setAttribute("role", "alert");
  banner.hidden = false;
}

function hideBanner() {
  const banner = document.getElementById("banner");
  banner.hidden = true;
  banner.replaceChildren();
}

/** The header's session controls: who is signed in, and "Sign out". */
function renderSession(user) {
  const el = document.getElementById("session");
  if (!enabled() || !getToken()) {
    el.replaceChildren();
    return;
  }
  const who = user && (user.name || user.email || user.id);
  replace(
    el,
    who ? h("span", { title: user.id ? `id ${user.id}` : null }, "Signed in as ", h("strong", {}, who)) : null,
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          clearToken();
          showSignIn();
        },
      },
      "Sign out",
    ),
  );
}
