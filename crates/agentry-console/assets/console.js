// The agentry operator console: the entry point. Reads what the server is (`GET /api/info`),
// asks for a token when it has an authentication provider, then routes every /console URL to
// its view. Vanilla ES modules, no build step: the files under assets/ are what the browser
// runs, embedded in the server's binary.

import { getToken } from "./api.js";
import * as auth from "./auth.js";
import { h, replace } from "./dom.js";
import { loadServerInfo } from "./info.js";
import * as router from "./router.js";
import * as agent from "./views/agent.js";
import * as agents from "./views/agents.js";
import * as approvals from "./views/approvals.js";
import * as execution from "./views/execution.js";
import * as executions from "./views/executions.js";
import * as logs from "./views/logs.js";
import * as overview from "./views/overview.js";
import * as queue from "./views/queue.js";
import * as queues from "./views/queues.js";
import * as run from "./views/run.js";
import * as schedule from "./views/schedule.js";
import * as schedules from "./views/schedules.js";

const ROUTES = [
  ["", overview],
  ["/executions", executions],
  ["/executions/:id", execution],
  ["/approvals", approvals],
  ["/agents", agents],
  ["/agents/:id", agent],
  ["/agents/:id/runs/:runId", run],
  ["/schedules", schedules],
  ["/schedules/:id", schedule],
  ["/queues", queues],
  ["/queues/:name", queue],
  ["/logs", logs],
];

/** Marks the header link of the current view. */
function markCurrent(path) {
  for (const a of document.querySelectorAll("#nav a")) {
    const href = a.getAttribute("href");
    const current = href === "/console" ? path === "/console" || path === "/console/" : path === href || path.startsWith(`${href}/`);
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

/** Whether views may render: no provider, or a token kept; else the sign-in form shows. */
function signedIn() {
  if (!auth.enabled() || getToken()) return true;
  auth.showSignIn();
  return false;
}

async function boot() {
  let info;
  try {
    info = await loadServerInfo();
  } catch (e) {
    replace(
      document.getElementById("main"),
      h("h1", {}, "The server did not answer"),
      h("p", { class: "alert", role: "alert" }, `GET /api/info: ${e.message}`),
      h("p", {}, h("a", { href: location.pathname + location.search }, "Try again")),
    );
    return;
  }
  replace(
    document.getElementById("server-info"),
    `${info.name} ${info.version} · ${info.database}`,
    info.authentication.enabled ? ` · authentication${info.authentication.strict ? " (strict)" : ""}` : "",
  );

  let started = false;
  const hooks = {
    ready() {
      if (started) router.refresh();
      else router.start(ROUTES, markCurrent, signedIn);
      started = true;
    },
    stop() {
      router.stopCurrent();
    },
  };
  try {
    await auth.init(info, hooks);
  } catch (e) {
    // GET /api/me could not say whether the kept token is good (a refusal shows the sign-in
    // form instead): say so, with a way to try again.
    replace(
      document.getElementById("main"),
      h("h1", {}, "Could not check your access token"),
      h("p", { class: "alert", role: "alert" }, e.message),
      h("p", {}, h("a", { href: location.pathname + location.search }, "Try again")),
    );
  }
}

boot();
