// The actions on an execution, shared by the approvals and the execution page: resume (a form
// generated from the workflow's resumeSchema), suspend (with a reason), cancel, retry (a failed
// execution, from its failed step), fork (a new execution from one of its steps, with the same
// or a new input) and sending it an event. Each answer shows below its form (aria-live), each
// refusal beside it (role="alert"), the form left as it was.

import { api, seg } from "./api.js";
import { executionLink, h, json, jsonDetails, replace, statusBadge } from "./dom.js";
import { schemaForm } from "./schema-form.js";

function executionPath(workflowId, executionId) {
  return `/workflows/${seg(workflowId)}/executions/${seg(executionId)}`;
}

/**
 * The Resume form of a suspended execution, from its workflow's `resumeSchema`. On success it
 * shows the outcome (status, result, a link to the execution) below the form and calls
 * `onDone(result)`; a refusal is shown beside the form and nothing else changes.
 */
export function resumeForm(workflow, executionId, { onDone = () => {}, onBusy, linkToExecution = true } = {}) {
  const outcome = h("div", { class: "outcome", "aria-live": "polite" });
  const { form, setDisabled } = schemaForm(workflow.resumeSchema, {
    submitLabel: "Resume",
    label: `Resume ${executionId}`,
    onBusy,
    async onSubmit(resumeData) {
      const body = resumeData === undefined ? {} : { resumeData };
      const result = await api(`${executionPath(workflow.id, executionId)}/resume`, {
        method: "POST",
        body,
      });
      setDisabled(true);
      replace(
        outcome,
        h(
          "p",
          { class: "notice" },
          "Resumed: the execution is now ",
          statusBadge(result.status),
          linkToExecution ? [" · ", executionLink(executionId, "Open the execution")] : null,
        ),
        result.result !== null && result.result !== undefined ? jsonDetails("Result", result.result, true) : null,
      );
      onDone(result);
    },
  });
  return h("div", { class: "resume" }, form, outcome);
}

/**
 * An action's form: `fields`, a submit button (`button`: its text, or `[text, class]`), an alert
 * for a refusal and an outcome (aria-live). On submit `run()` is awaited with the button
 * disabled: what it resolves to is shown as the outcome; what it throws, in the alert.
 */
function actionForm(label, button, fields, run) {
  const [text, cls] = [].concat(button);
  const alert = h("p", { class: "alert", role: "alert" });
  const outcome = h("div", { class: "outcome", "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: cls }, text);
  const form = h("form", { class: "inline-form", "aria-label": label }, fields, submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    alert.textContent = "";
    replace(outcome);
    submit.disabled = true;
    try {
      replace(outcome, await run());
    } catch (e) {
      if (e.name !== "AbortError") alert.textContent = e.message;
    } finally {
      submit.disabled = false;
    }
  });
  return h("div", {}, form, alert, outcome);
}

let fieldCount = 0;

/** A labelled input (`tag`: input, textarea, select) in a `.field`: `{row, input}`. */
function field(label, tag, attrs = {}, ...children) {
  const id = `action-field-${++fieldCount}`;
  const input = h(tag, { id, autocomplete: "off", ...attrs }, ...children);
  return { row: h("div", { class: "field" }, h("label", { for: id }, label), input), input };
}

/**
 * A JSON text area: `read()` gives its value (`undefined` when empty) or throws, before anything
 * is sent, a clear message naming `label`, and marks it invalid.
 */
function jsonField(label, value) {
  const f = field(label, "textarea", { rows: 4, spellcheck: "false" });
  f.input.value = value === undefined ? "" : json(value);
  f.input.addEventListener("input", () => f.input.removeAttribute("aria-invalid"));
  f.read = () => {
    if (!f.input.value.trim()) return undefined;
    try {
      return JSON.parse(f.input.value);
    } catch (e) {
      f.input.setAttribute("aria-invalid", "true");
      f.input.focus();
      throw new Error(`${label}: not valid JSON (${e.message}); nothing was sent.`);
    }
  };
  f.row.classList.add("wide");
  return f;
}

/** The Suspend form of a running execution: a reason and a button. */
export function suspendForm(workflowId, executionId, { onDone = () => {} } = {}) {
  const reason = field("Reason", "input", { name: "reason", type: "text", value: "Suspended from the console" });
  return actionForm("Suspend", "Suspend", reason.row, async () => {
    const { status, data } = await api(`${executionPath(workflowId, executionId)}/suspend`, {
      method: "POST",
      body: reason.input.value.trim() ? { reason: reason.input.value.trim() } : {},
      withStatus: true,
    });
    onDone(data, status === 202);
  });
}

/** The Cancel button of a running or suspended execution. */
export function cancelButton(workflowId, executionId, { onDone = () => {} } = {}) {
  return actionForm("Cancel", ["Cancel execution", "danger"], [], async () => {
    onDone(
      await api(`${executionPath(workflowId, executionId)}/cancel`, {
        method: "POST",
        body: { reason: "Cancelled from the console" },
      }),
    );
  });
}

/**
 * The Retry button of a failed execution: it runs again from its failed step, under the same
 * id, and the call answers once that run stops. `onStart()` is called as it is sent and
 * `onDone()` once it answers, whatever the answer (the execution may have run again either way).
 */
export function retryButton(workflowId, executionId, { onStart = () => {}, onDone = () => {} } = {}) {
  return actionForm("Retry", "Retry from the failed step", [], async () => {
    onStart();
    try {
      const data = await api(`${executionPath(workflowId, executionId)}/retry`, { method: "POST" });
      return h("p", { class: "notice" }, "Retried: the execution is now ", statusBadge(data.status));
    } finally {
      onDone();
    }
  });
}

/**
 * The Fork form of an execution: the step to run again from (one of the workflow's top-level
 * steps, `fromStep` preselected), the input (prefilled with `input`; empty: the source's) and an
 * optional id for the new execution. The answer links to the new execution, also when it ran
 * and failed (the failure names it in `X-Execution-Id`).
 */
export function forkForm(workflow, executionId, { input, fromStep } = {}) {
  const step = field(
    "From step",
    "select",
    { name: "fromStep" },
    workflow.steps.map((s) => h("option", { value: s.id, selected: s.id === fromStep }, `${s.id} (${s.type})`)),
  );
  const data = jsonField("Input (JSON)", input);
  data.row.append(h("span", { class: "hint", id: `${data.input.id}-hint` }, "Empty: the same input."));
  data.input.setAttribute("aria-describedby", `${data.input.id}-hint`);
  const id = field("New execution id", "input", { name: "executionId", type: "text", placeholder: "generated" });
  return actionForm("Fork", "Fork", [step.row, id.row, data.row], async () => {
    const body = { fromStep: step.input.value, input: data.read() };
    if (id.input.value.trim()) body.executionId = id.input.value.trim();
    let result;
    try {
      result = await api(`${executionPath(workflow.id, executionId)}/fork`, { method: "POST", body });
    } catch (e) {
      if (!e.executionId) throw e;
      return h("p", { class: "alert" }, `${e.message}: `, executionLink(e.executionId));
    }
    return h("p", { class: "notice" }, "Forked: ", executionLink(result.executionId), " is ", statusBadge(result.status));
  });
}

/**
 * The form that sends an event to one execution: its name (`name` prefilled) and JSON data.
 * The answer says whether a waiting step took it (`resumed`) or it waits in the mailbox
 * (`queued`), and whether it was a duplicate; then `onDone(answer)`.
 */
export function eventForm(workflowId, executionId, { name = "", onDone = () => {} } = {}) {
  const event = field("Event name", "input", { name: "event", type: "text", required: true, value: name });
  const data = jsonField("Data (JSON)");
  return actionForm("Send an event", "Send event", [event.row, data.row], async () => {
    const path = `${executionPath(workflowId, executionId)}/events/${seg(event.input.value.trim())}`;
    const answer = await api(path, { method: "POST", body: { data: data.read() ?? null } });
    onDone(answer);
    return h(
      "p",
      { class: "notice" },
      answer.duplicate ? "Delivered before (the same event id): " : "Delivered: ",
      answer.delivery === "resumed" ? "resumed, the waiting step took it" : "queued in the mailbox",
      ` (event ${answer.eventId}); the execution is `,
      statusBadge(answer.status),
    );
  });
}
