// /console/executions/<executionId>: one execution. Its status, workflow, input, context, user,
// origin when it is a fork, and outcome (result, error, cancellation or suspension, with the
// event it waits for); the timeline of its steps (composite steps' children under their
// parent); its mailbox (the events delivered to it, waiting or taken); its events, followed live
// through the re-attach stream (`GET /workflows/{id}/executions/{executionId}/stream`, resumed
// after the last event id); and the actions its status allows: suspend, resume, cancel, retry
// (when failed), fork (from one of the workflow's steps), send an event (one its workflow
// declares, while it has not ended). An execution of a queued workflow shows its queue: the
// queue's name, the key and priority it entered with, since when it waits (while `queued`) or
// when it started and how long it waited; a queued execution can be cancelled (it never starts).
//
// The stream ends whenever the execution stops running (suspended, completed, ...). While it
// is not terminal, or a retry is in flight, the page reads the state every two seconds (tab
// visible) and follows the stream again as soon as the execution runs (a resume elsewhere, a
// deadline that fired, the retry's new run under the same id).

import { cancelButton, eventForm, forkForm, resumeForm, retryButton, suspendForm } from "../actions.js";
import { api, seg, workflowDetail } from "../api.js";
import {
  consoleUrl,
  duration,
  executionLink,
  facts,
  h,
  json,
  jsonDetails,
  replace,
  setStatus,
  setText,
  statusBadge,
  time,
} from "../dom.js";
import { countdown, elapsed, poll } from "../live.js";
import { stream } from "../sse.js";

const TERMINAL = new Set(["completed", "error", "cancelled"]);
const MAX_EVENTS = 1000;

export async function render({ main, params, signal, title }) {
  const executionId = params.id;
  title(`Execution ${executionId}`);
  let state = await api(`/executions/${seg(executionId)}`, { signal });
  const workflow = await workflowDetail(state.workflowId);
  const base = `/workflows/${seg(state.workflowId)}/executions/${seg(executionId)}`;

  // ---- The page's parts, each updated in place ----
  const status = statusBadge(state.status);
  status.dataset.testid = "execution-status";
  const ended = h("span");
  const took = h("span", { class: "nums" });
  const outcome = h("section", { "aria-labelledby": "outcome-title" });
  const queue = h("section", { "aria-labelledby": "queue-title", "data-testid": "execution-queue", hidden: true });
  const actions = h("div", { class: "actions" });
  const timeline = h("ol", { class: "timeline", "aria-label": "Timeline" });
  const mailbox = h("ol", { class: "timeline", "aria-label": "Mailbox" });
  const mailboxSection = h("section", { "aria-labelledby": "mailbox-title", hidden: true }, h("h2", { id: "mailbox-title" }, "Mailbox"), mailbox);
  const events = h("ol", { class: "events", "aria-label": "Events", tabindex: "0" });
  const streamState = h("p", { class: "stream-state", "aria-live": "polite" });
  const refreshError = h("p", { class: "alert", role: "alert" });

  replace(
    main,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Execution ", h("span", { class: "mono" }, executionId)),
      h("p", {}, h("a", { href: consoleUrl("/executions", { workflow: state.workflowId }) }, `All executions of ${state.workflowId}`)),
    ),
    refreshError,
    h(
      "div",
      { class: "exec-layout" },
      h(
        "div",
        {},
        facts([
          ["Status", status],
          ["Workflow", h("span", {}, h("a", { href: consoleUrl("/executions", { workflow: state.workflowId }) }, workflow.name), " ", h("code", {}, state.workflowId))],
          ["Started", time(state.startAt)],
          ["Ended", ended],
          ["Duration", took],
          ["User", state.userId ? h("code", {}, state.userId) : h("span", { class: "muted" }, "—")],
          ["Version", state.version ? h("code", { "data-testid": "execution-version" }, state.version) : h("span", { class: "muted" }, "before versions")],
          [
            "Origin",
            state.forkedFrom
              ? h("span", { dataset: { testid: "forked-from" } }, "Forked from ", executionLink(state.forkedFrom.executionId), " at step ", h("code", {}, state.forkedFrom.stepId))
              : undefined,
          ],
        ]),
        queue,
        outcome,
        h("section", { "aria-labelledby": "actions-title" }, h("h2", { id: "actions-title" }, "Actions"), actions),
        h("section", { "aria-labelledby": "timeline-title" }, h("h2", { id: "timeline-title" }, "Timeline"), timeline),
        mailboxSection,
        h("section", { "aria-labelledby": "data-title" }, h("h2", { id: "data-title" }, "Input and context"), jsonDetails("Input", state.input, true), jsonDetails("Context", state.context)),
      ),
      h(
        "section",
        { "aria-labelledby": "events-title" },
        h("h2", { id: "events-title" }, "Events"),
        streamState,
        events,
      ),
    ),
  );

  // ---- Drawing the state ----
  let outcomeKey = null;
  let queueKey = null;
  let actionsKey = null;
  let mailboxKey = null;
  const steps = new Map(); // step id -> {li, status, meta, io, children, key}

  function draw() {
    setStatus(status, state.status);
    replace(ended, state.endAt ? time(state.endAt) : h("span", { class: "muted" }, "—"));
    setText(took, state.endAt ? duration(new Date(state.endAt) - new Date(state.startAt)) : "—");

    const oKey = json([state.status, state.result, state.error, state.cancellation, state.suspension, state.suspendRequest]);
    if (oKey !== outcomeKey) {
      outcomeKey = oKey;
      drawOutcome();
    }
    const qKey = json([state.status, state.queue]);
    if (qKey !== queueKey) {
      queueKey = qKey;
      drawQueue();
    }
    const aKey = json([state.status, Boolean(state.suspendRequest), eventsShown()]);
    if (aKey !== actionsKey) {
      actionsKey = aKey;
      drawActions();
    }
    drawTimeline();
    drawMailbox();
  }

  // The outcome's countdown lives until the outcome is drawn again.
  let outcomeTimers = null;
  function drawOutcome() {
    outcomeTimers?.abort();
    outcomeTimers = new AbortController();
    signal.addEventListener("abort", () => outcomeTimers.abort(), { once: true });
    const parts = [];
    let heading = "Outcome";
    if (state.status === "completed") {
      heading = "Result";
      parts.push(h("pre", {}, json(state.result)));
    } else if (state.status === "error") {
      heading = "Error";
      parts.push(
        h("p", { class: "alert" }, state.error ? state.error.message : "The execution failed."),
        state.error && state.error.stepId ? h("p", {}, "Failed step: ", h("code", {}, state.error.stepId)) : null,
      );
    } else if (state.status === "cancelled") {
      heading = "Cancellation";
      const c = state.cancellation || {};
      parts.push(facts([["Cancelled", time(c.cancelledAt)], ["Reason", c.reason || h("span", { class: "muted" }, "none given")]]));
    } else if (state.status === "suspended") {
      heading = "Suspension";
      const s = state.suspension || {};
      parts.push(
        facts([
          ["Reason", s.reason],
          ["Suspended", time(s.suspendedAt)],
          ["Resumes at step", h("code", {}, s.stepId)],
          ["Deadline", s.deadline ? h("span", {}, time(s.deadline), " · ", countdown(s.deadline, outcomeTimers.signal)) : undefined],
          ["Suspend data", s.suspendData !== null && s.suspendData !== undefined ? h("pre", {}, json(s.suspendData)) : undefined],
        ]),
        s.event
          ? h(
              "p",
              {},
              "Waits for event ",
              h("code", {}, s.event.name),
              s.event.key ? [" with key ", h("code", {}, s.event.key)] : " (sent to this execution only)",
              ".",
            )
          : null,
      );
    } else if (state.status === "queued") {
      heading = "Queued";
      const q = state.queue || {};
      parts.push(
        h(
          "p",
          {},
          "Waits in queue ",
          h("code", {}, q.name ?? "?"),
          q.key !== null && q.key !== undefined ? [" with key ", h("code", {}, q.key)] : null,
          q.queuedAt ? [" since ", time(q.queuedAt)] : null,
          ": it starts when the queue's limits allow.",
        ),
      );
    } else if (state.status === "running") {
      heading = "Progress";
      parts.push(h("p", { class: "muted" }, `Running: step ${state.nextStepIndex + 1} of ${workflow.stepsCount}.`));
      if (state.suspendRequest) {
        parts.push(h("p", {}, `Suspend requested (${state.suspendRequest.reason}): it takes effect at the next step boundary.`));
      }
    }
    replace(outcome, h("h2", { id: "outcome-title" }, heading), parts);
  }

  // The queue's wait counts up until the queue is drawn again.
  let queueTimers = null;
  function drawQueue() {
    queueTimers?.abort();
    queueTimers = new AbortController();
    signal.addEventListener("abort", () => queueTimers.abort(), { once: true });
    const q = state.queue;
    queue.hidden = !q;
    if (!q) return;
    replace(queue, h("h2", { id: "queue-title" }, "Queue"), facts(queueFacts(q, queueTimers.signal)));
  }

  // Name, key, priority, and the wait: going on (queued), or how long it was (started).
  function queueFacts(q, timers) {
    const queuedAt = q.queuedAt ? time(q.queuedAt) : h("span", { class: "muted" }, "—");
    let start;
    if (q.startedAt) {
      const waited = q.queuedAt ? ` after waiting ${duration(new Date(q.startedAt) - new Date(q.queuedAt))}` : "";
      start = ["Started", h("span", { dataset: { testid: "queue-started" } }, time(q.startedAt), waited)];
    } else if (state.status === "queued") {
      start = ["Waiting", h("span", { dataset: { testid: "queue-waiting" } }, "for ", q.queuedAt ? elapsed(q.queuedAt, timers) : "—")];
    } else {
      start = ["Started", h("span", { class: "muted" }, "never")];
    }
    return [
      ["Queue", h("a", { href: consoleUrl(`/queues/${encodeURIComponent(q.name)}`), class: "mono" }, q.name)],
      ["Key", q.key !== null && q.key !== undefined ? h("code", {}, q.key) : h("span", { class: "muted" }, "none")],
      ["Priority", String(q.priority ?? 0)],
      ["Queued", queuedAt],
      start,
    ];
  }

  // The retry, fork and event forms are made once and kept across redraws (what was typed in
  // them, and their answers, stay).
  const card = (id, title, body) => h("section", { class: "card", "aria-labelledby": id }, h("h3", { id }, title), body);
  let busy = 0; // retries in flight: the page watches the state meanwhile
  let retry = null;
  const fork = workflow.steps.length
    ? card("fork-title", "Fork", forkForm(workflow, executionId, { input: state.input, fromStep: state.error?.stepId }))
    : null;
  let sendEvent = null;
  let eventSent = false;
  // An event its workflow declares can be sent while it has not ended (and, once sent, the
  // answer stays).
  const eventsShown = () => eventSent || (!TERMINAL.has(state.status) && Boolean(workflow.events?.length));

  function drawActions() {
    const done = () => afterAction();
    const list = [];
    if (state.status === "running") {
      list.push(suspendForm(state.workflowId, executionId, { onDone: done }));
    }
    if (state.status === "suspended") {
      list.push(card("resume-title", "Resume", resumeForm(workflow, executionId, { onDone: done, linkToExecution: false })));
    }
    if (state.status === "queued" || state.status === "running" || state.status === "suspended") {
      list.push(cancelButton(state.workflowId, executionId, { onDone: done }));
    }
    if (state.status === "error") {
      retry ??= retryButton(state.workflowId, executionId, {
        onStart: () => busy++,
        onDone: () => {
          busy--;
          afterAction();
        },
      });
      list.push(retry);
    }
    if (eventsShown()) {
      sendEvent ??= card(
        "event-title",
        "Send an event",
        eventForm(state.workflowId, executionId, {
          name: state.suspension?.event?.name ?? workflow.events[0].name,
          onDone: () => {
            eventSent = true;
            afterAction();
          },
        }),
      );
      list.push(sendEvent);
    }
    if (!list.length && !fork) list.push(h("p", { class: "muted" }, `None: the execution is ${state.status}.`));
    replace(actions, list, fork);
  }

  function drawMailbox() {
    const entries = state.mailbox || [];
    const key = json(entries);
    if (key === mailboxKey) return;
    mailboxKey = key;
    mailboxSection.hidden = !entries.length;
    const part = keptOpen(mailbox);
    replace(
      mailbox,
      entries.map((m) =>
        h(
          "li",
          { dataset: { eventId: m.eventId } },
          h(
            "div",
            { class: "step" },
            h("div", { class: "step-head" }, statusBadge(m.status), h("span", { class: "step-id" }, m.name), h("span", { class: "small muted mono" }, m.eventId)),
            h(
              "div",
              { class: "step-meta" },
              h("span", {}, "received ", time(m.receivedAt)),
              m.key ? h("span", {}, "key ", h("code", {}, m.key)) : null,
              m.takenBy ? h("span", {}, "taken by ", h("code", {}, m.takenBy), " ", time(m.takenAt)) : null,
            ),
            part(m.eventId, "Data", m.data),
          ),
        ),
      ),
    );
  }

  function drawTimeline() {
    // The workflow's steps in order (pending until they start), then anything else that ran.
    const order = workflow.steps.map((s) => s.id);
    const recorded = Object.entries(state.steps || {});
    for (const [id] of recorded) if (!order.includes(id) && !state.steps[id].parentStepId) order.push(id);
    order.forEach((id, i) => {
      const row = stepRow(id, null);
      if (timeline.children[i] !== row.li) timeline.insertBefore(row.li, timeline.children[i] || null);
      updateStep(row, id, state.steps[id]);
    });
    // Children under their parent, in the order they started.
    for (const [id, rec] of recorded) {
      if (!rec.parentStepId) continue;
      const parent = stepRow(rec.parentStepId, null);
      const row = stepRow(id, parent);
      if (row.li.parentElement !== parent.children) parent.children.append(row.li);
      parent.children.hidden = false;
      updateStep(row, id, rec);
    }
  }

  function stepRow(id, parent) {
    let row = steps.get(id);
    if (row) return row;
    const def = workflow.steps.find((s) => s.id === id);
    const badge = statusBadge("pending");
    badge.dataset.testid = "step-status";
    row = {
      li: h("li", { dataset: { stepId: id } }),
      status: badge,
      meta: h("div", { class: "step-meta" }),
      io: h("div", { class: "step-io" }),
      children: h("ol", { class: "children", hidden: true, "aria-label": `Steps of ${id}` }),
      key: null,
    };
    row.li.append(
      h(
        "div",
        { class: "step" },
        h(
          "div",
          { class: "step-head" },
          badge,
          h("span", { class: "step-id" }, id),
          def ? h("span", { class: "small muted" }, `${def.type} · ${def.name}`) : parent ? h("span", { class: "small muted" }, "child step") : null,
        ),
        row.meta,
        row.io,
      ),
      row.children,
    );
    steps.set(id, row);
    return row;
  }

  function updateStep(row, id, rec) {
    const key = json(rec || null);
    if (key === row.key) return;
    row.key = key;
    if (!rec) {
      setStatus(row.status, "pending");
      replace(row.meta, h("span", {}, "not started"));
      return;
    }
    setStatus(row.status, rec.status);
    const ms = rec.endedAt ? new Date(rec.endedAt) - new Date(rec.startedAt) : null;
    replace(
      row.meta,
      h("span", {}, `attempt ${rec.attempt}`),
      h("span", {}, "started ", time(rec.startedAt)),
      h("span", {}, ms !== null ? `took ${duration(ms)}` : rec.status === "suspended" ? "waiting" : "running…"),
      rec.failures && rec.failures.length ? h("span", {}, `${rec.failures.length} failed attempt${rec.failures.length > 1 ? "s" : ""}`) : null,
    );
    const part = keptOpen(row.io);
    replace(
      row.io,
      part("Input", "Input", rec.input),
      rec.output !== null && rec.output !== undefined ? part("Output", "Output", rec.output) : null,
      rec.failures && rec.failures.length ? part("Failures", "Failures", rec.failures) : null,
    );
  }

  // ---- Reading the state again (coalesced: one read at a time, one more if asked meanwhile) ----
  let reading = null;
  let again = false;
  async function refreshState() {
    if (reading) {
      again = true;
      return reading;
    }
    reading = (async () => {
      do {
        again = false;
        try {
          state = await api(`/executions/${seg(executionId)}`, { signal });
          refreshError.textContent = "";
          draw();
        } catch (e) {
          if (e.name === "AbortError" || signal.aborted) return;
          refreshError.textContent = e.message;
        }
      } while (again && !signal.aborted);
    })();
    try {
      await reading;
    } finally {
      reading = null;
    }
  }

  // ---- The event stream ----
  let lastEventId = null;
  let following = false;
  let followedStatus = null; // the status when the last stream ended
  let followAgain = false; // an action while a stream was open: read the log again after it

  function addEvent(ev, id) {
    const atBottom = events.scrollHeight - events.scrollTop - events.clientHeight < 8;
    const detail =
      ev.from ||
      (ev.type === "workflow-suspended" && ev.suspension && ev.suspension.reason) ||
      (ev.type === "workflow-error" && ev.error) ||
      (ev.type === "workflow-result" && ev.status) ||
      (ev.type === "step-retry" && `${ev.from} attempt ${ev.attempt}: ${ev.error}`) ||
      (ev.type === "workflow-queued" && queuedDetail(ev.queue)) ||
      "";
    events.append(
      h(
        "li",
        { dataset: { type: ev.type } },
        h("span", { class: "seq" }, id ?? ""),
        h("span", { class: "type" }, ev.type),
        h("span", { class: "detail" }, detail),
        ev.timestamp ? h("span", { class: "when" }, time(ev.timestamp)) : null,
      ),
    );
    while (events.children.length > MAX_EVENTS) events.firstElementChild.remove();
    if (atBottom) events.scrollTop = events.scrollHeight;
  }

  async function follow() {
    if (following || signal.aborted) return;
    following = true;
    setText(streamState, "Following live…");
    let failed = null;
    let ended = null; // the status its last `workflow-result` reported
    try {
      await stream(
        `${base}/stream`,
        { signal, headers: lastEventId ? { "Last-Event-ID": lastEventId } : {} },
        (msg) => {
          if (msg.id) lastEventId = msg.id;
          let ev;
          try {
            ev = JSON.parse(msg.data);
          } catch {
            return;
          }
          if (ev.type === "workflow-result") ended = ev.status;
          addEvent(ev, msg.ownId ? msg.id : null);
          refreshState();
        },
      );
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted) return;
      failed = e;
    } finally {
      following = false;
    }
    await refreshState();
    // The status the stream ended on, not the one read after it: a change in between (a retry
    // that ran at once) is then followed too.
    followedStatus = ended ?? state.status;
    if ((followAgain || followedStatus !== state.status) && !failed) {
      // The stream may have ended before what the action wrote (a retry that ran at once).
      followAgain = false;
      return follow();
    }
    if (failed && (failed.status === 0 || failed.status >= 500)) {
      setText(streamState, `The stream was interrupted (${failed.message}); trying again…`);
      setTimeout(follow, 2000);
    } else if (failed) {
      setText(streamState, `No live events: ${failed.message}`);
    } else if (state.status === "running") {
      follow();
    } else {
      setText(
        streamState,
        TERMINAL.has(state.status)
          ? `The execution is ${state.status}: no more events.`
          : state.status === "queued"
            ? "The execution is queued: events continue when it starts."
            : `The execution is ${state.status}: events continue when it runs again.`,
      );
    }
  }

  // After an action: read the state, and the log from the last event seen (once the open
  // stream, if any, ends: it may have ended before what the action wrote).
  async function afterAction() {
    await refreshState();
    if (following) followAgain = true;
    else follow();
  }

  draw();
  follow();
  // While not terminal, and not following, look for a change (a resume elsewhere, a deadline).
  poll(
    async () => {
      if (following || (!busy && TERMINAL.has(state.status) && followedStatus === state.status)) return;
      await refreshState();
      if (!following && state.status !== followedStatus) follow();
    },
    2000,
    signal,
  );
}

/** The detail of a `workflow-queued` event: `queue enrich-customer · key c-1 · priority 0`. */
function queuedDetail(q) {
  if (!q) return "";
  return [`queue ${q.name}`, q.key !== null && q.key !== undefined ? `key ${q.key}` : null, `priority ${q.priority ?? 0}`]
    .filter(Boolean)
    .join(" · ");
}

/**
 * Makes the `<details>` of JSON values for `container`'s next drawing, `part(key, label, value)`,
 * each open or closed as the reader left the one of the same key.
 */
function keptOpen(container) {
  const open = {};
  for (const d of container.querySelectorAll("details")) open[d.dataset.part] = d.open;
  return (key, label, value) => {
    const d = jsonDetails(label, value, open[key] ?? false);
    d.dataset.part = key;
    return d;
  };
}
