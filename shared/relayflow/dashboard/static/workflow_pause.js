// Pausing a whole workflow from the runs list filtered by it: a banner while the workflow is
// paused in the chosen environment, and "Pause workflow" / "Resume workflow" dialogs that link
// the bulk job the change started.

import { api, ApiError } from "./api.js";
import { jobHref } from "./bulk.js";
import { h, replace, toast } from "./dom.js";
import { formatTime } from "./format.js";

const ENVIRONMENTS = ["development", "preview", "production"];
const DEFAULT_RESUME_RATE = 50; // the API's own default

function refusal(error) {
  return error instanceof ApiError && error.code ? `${error.message} (${error.code})` : error.message;
}

function workflowPath(workflowId, change) {
  return "api/workflows/" + encodeURIComponent(workflowId) + "/" + change;
}

// The dialog of "Pause workflow" (change "pause") or "Resume workflow" (change "resume").
function openChangeDialog(workflowId, environment, change, done) {
  const env = h("select", { id: "workflow-change-environment" },
    ENVIRONMENTS.map((e) => h("option", { value: e, selected: e === environment }, e)));
  const reason = h("input", { id: "workflow-change-reason", size: 40, placeholder: "optional" });
  const rate = h("input", { id: "workflow-change-rate", type: "number", min: "0.1", step: "any",
    max: "10000", value: String(DEFAULT_RESUME_RATE), size: 8 });
  const status = h("p", { class: "field-error", role: "alert", id: "workflow-change-error" });
  const dialog = h("dialog", { id: "workflow-change-dialog", "aria-labelledby": "workflow-change-title" });
  const close = () => { dialog.close(); dialog.remove(); };
  const submit = h("button", { type: "button", class: "primary", id: "workflow-change-submit" },
    change === "pause" ? "Pause workflow" : "Resume workflow");
  submit.addEventListener("click", async () => {
    status.textContent = "";
    const body = { environment: env.value };
    if (reason.value.trim()) body.reason = reason.value.trim();
    if (change === "resume") body.ratePerSecond = Number(rate.value);
    submit.disabled = true;
    try {
      const changed = await api(workflowPath(workflowId, change), { method: "POST", body });
      close();
      toast(change === "pause" ? `${workflowId} paused` : `${workflowId} resumed`);
      done(changed);
    } catch (error) {
      submit.disabled = false;
      status.textContent = refusal(error);
    }
  });
  dialog.append(
    h("h2", { id: "workflow-change-title" }, change === "pause" ? "Pause " : "Resume ", h("code", {}, workflowId)),
    h("p", { class: "muted" }, change === "pause"
      ? "New runs start paused, and a bulk job pauses the runs in flight."
      : "New runs start again, and a bulk job resumes the paused runs at the rate below at most."),
    h("label", { for: env.id }, "Environment", env),
    h("label", { for: reason.id }, "Reason", reason),
    change === "resume" ? h("label", { for: rate.id }, "Runs resumed per second", rate) : null,
    status,
    h("div", { class: "row" }, submit, h("button", { type: "button", id: "workflow-change-close", onclick: close }, "Close")));
  document.body.append(dialog);
  dialog.showModal();
  return dialog;
}

// The workflow's pause state in `environment` and its controls; reloads after a change.
export function workflowPausePanel(workflowId, environment, signal) {
  const panel = h("section", { id: "workflow-pause", "aria-live": "polite" });
  let lastJob = null;

  const jobLine = () => lastJob
    ? h("p", { id: "workflow-pause-job" }, `The ${lastJob.action} job: `,
      h("a", { class: "mono", href: jobHref(lastJob.jobId) }, lastJob.jobId), ` (${lastJob.status})`)
    : null;

  const changed = (answer) => {
    lastJob = answer.job;
    load();
  };

  function show(mark) {
    if (mark) {
      const reason = mark.reason ? `: ${mark.reason}` : "";
      replace(panel, h("div", { class: "notice warning", id: "workflow-paused-banner", role: "status" },
        h("p", {}, h("strong", {}, `${workflowId} is paused in ${environment}`),
          ` since ${formatTime(mark.pausedAt)} by ${mark.by}${reason}. New runs start paused.`),
        h("button", { type: "button", class: "primary", id: "resume-workflow",
          onclick: () => openChangeDialog(workflowId, environment, "resume", changed) }, "Resume workflow")),
      jobLine());
    } else {
      replace(panel, h("div", { class: "row" },
        h("button", { type: "button", id: "pause-workflow",
          onclick: () => openChangeDialog(workflowId, environment, "pause", changed) }, "Pause workflow")),
      jobLine());
    }
  }

  function load() {
    api("api/paused-workflows", { signal, query: { environment } })
      .then((answer) => show((answer.workflows || []).find((w) => w.workflowId === workflowId)))
      .catch((error) => {
        if (error.name === "AbortError") return;
        replace(panel, h("p", { class: "field-error", id: "workflow-pause-error" }, refusal(error)));
      });
  }

  load();
  return panel;
}
