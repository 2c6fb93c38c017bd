// Client-side routing with the History API. Every view is a URL under /console (the server
// answers each with index.html); links are ordinary `<a href>` that this router handles without
// reloading the page, so they can also be opened in a new tab, copied and shared.

import { h, replace } from "./dom.js";

let routes = [];
let current = null; // {controller}
let onRender = () => {};
let guard = () => true;

/**
 * Starts routing. `table` is a list of `[pattern, view]`: a pattern is a path under /console
 * with `:name` segments (`/executions/:id`), a view an object with `render(ctx)`.
 * `hook(path)` runs before every render (the header's current link); `allow()` is asked first
 * and renders nothing when it says no (it shows the sign-in form instead).
 */
export function start(table, hook, allow) {
  routes = table.map(([pattern, view]) => [compile(pattern), view]);
  onRender = hook || onRender;
  guard = allow || guard;
  document.addEventListener("click", onClick);
  window.addEventListener("popstate", () => render({ focus: true }));
  render({ focus: false });
}

/** Goes to a console URL (a path with its query), adding a history entry unless `replace`. */
export function navigate(url, { replace: replaceEntry = false } = {}) {
  if (replaceEntry) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render({ focus: !replaceEntry });
}

/**
 * Puts a new URL in the address bar for the current view (a filter changed) without rendering
 * it again: the view updates itself. Back and forward render the URL as usual.
 */
export function pushUrl(url, { replace: replaceEntry = false } = {}) {
  if (url === location.pathname + location.search) return;
  if (replaceEntry) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

/** Renders the current URL's view again (after signing in). */
export function refresh() {
  render({ focus: false });
}

/** Stops the current view (its streams and timers) without rendering another one. */
export function stopCurrent() {
  current?.controller.abort();
  current = null;
}

function compile(pattern) {
  const names = [];
  const source = pattern
    .split("/")
    .map((part) => {
      if (part.startsWith(":")) {
        names.push(part.slice(1));
        return "([^/]+)";
      }
      return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("/");
  return { regex: new RegExp(`^/console${source}/?$`), names };
}

function match(path) {
  for (const [{ regex, names }, view] of routes) {
    const m = regex.exec(path);
    if (m) {
      const params = {};
      names.forEach((name, i) => {
        params[name] = decodeURIComponent(m[i + 1]);
      });
      return { view, params };
    }
  }
  return null;
}

async function render({ focus }) {
  current?.controller.abort();
  const controller = new AbortController();
  current = { controller };
  const main = document.getElementById("main");
  const path = location.pathname;
  onRender(path);
  if (!guard()) return;
  const found = match(path);
  main.replaceChildren();
  const ctx = {
    main,
    params: found ? found.params : {},
    query: new URLSearchParams(location.search),
    signal: controller.signal,
    title(text) {
      document.title = `${text} · agentry console`;
    },
  };
  try {
    if (!found) {
      notFound(ctx);
    } else {
      await found.view.render(ctx);
    }
  } catch (e) {
    if (e.name === "AbortError" || controller.signal.aborted) return;
    showFailure(ctx, e);
  }
  if (focus && !controller.signal.aborted) {
    // Move the keyboard focus to the new view's heading, as a page load would.
    const heading = main.querySelector("h1");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus({ preventScroll: true });
    }
    window.scrollTo(0, 0);
  }
}

/** A view that could not load: its heading and the server's message. */
function showFailure(ctx, error) {
  ctx.title("Error");
  replace(
    ctx.main,
    h("h1", {}, "Could not load this view"),
    h("p", { role: "alert", class: "alert" }, error.message || String(error)),
    h("p", {}, h("a", { href: location.pathname + location.search }, "Try again")),
  );
}

function notFound(ctx) {
  ctx.title("Not found");
  replace(
    ctx.main,
    h("h1", {}, "Not found"),
    h("p", {}, "The console has no view at ", h("code", {}, location.pathname), "."),
    h("p", {}, h("a", { href: "/console" }, "Go to the overview")),
  );
}

function onClick(event) {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const a = event.target.closest("a[href]");
  if (!a || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin) return;
  if (!/^\/console(\/|$)/.test(url.pathname) || url.pathname.startsWith("/console/assets/")) return;
  const samePage = url.pathname + url.search === location.pathname + location.search;
  if (samePage && url.hash) return; // an anchor in this view (the skip link): the browser's own
  event.preventDefault();
  if (samePage) {
    render({ focus: true });
    return;
  }
  navigate(url.pathname + url.search);
}
