// The actions on an execution, shared by the approvals and the execution page: resume (a form
// generated from the workflow's resumeSchema), suspend (with a reason) and cancel.

import { api, seg } from "./api.js";
import { executionLink, h, jsonDetails, replace, statusBadge } from "./dom.js";
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

/** The Suspend form of a running execution: a reason and a button. */
export function suspendForm(workflowId, executionId, { onDone = () => {} } = {}) {
  const id = `suspend-reason-${executionId}`;
  const reason = h("input", { id, name: "reason", type: "text", value: "Suspended from the console", autocomplete: "off" });
  const alert = h("p", { class: "alert", role: "alert" });
  const button = h("button", { type: "submit" }, "Suspend");
  const form = h(
    "form",
    { class: "inline-form", "aria-label": "Suspend" },
    h("div", { class: "field" }, h("label", { for: id }, "Reason"), reason),
    button,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    alert.textContent = "";
    button.disabled = true;
    try {
      const { status, data } = await api(`${executionPath(workflowId, executionId)}/suspend`, {
        method: "POST",
        body: reason.value.trim() ? { reason: reason.value.trim() } : {},
        withStatus: true,
      });
      onDone(data, status === 202);
    } catch (e) {
      alert.textContent = e.message;
    } finally {
      button.disabled = false;
    }
  });
  return h("div", {}, form, alert);
}

/** The Cancel button of a running or suspended execution. */
export function cancelButton(workflowId, executionId, { onDone = () => {} } = {}) {
  const alert = h("p", { class: "alert", role: "alert" });
  const button = h("button", { type: "button", class: "danger" }, "Cancel execution");
  button.addEventListener("click", async () => {
    alert.textContent = "";
    button.disabled = true;
    try {
      const data = await api(`${executionPath(workflowId, executionId)}/cancel`, {
        method: "POST",
        body: { reason: "Cancelled from the console" },
      });
      onDone(data);
    } catch (e) {
      alert.textContent = e.message;
    } finally {
      button.disabled = false;
    }
  });
  return h("div", {}, button, alert);
}
