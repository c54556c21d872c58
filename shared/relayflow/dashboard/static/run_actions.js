// Operator actions on one run: pause, resume, redrive, upgrade to the current version and
// cancel (each shown only when it applies to the run), what operators did to it (paused since, redrives, rerun links)
// and the "Rerun from here" dialog. A refused action (409) shows the API's message.

import { api, ApiError, runPath } from "./api.js";
import { h, toast } from "./dom.js";
import { formatTime, timeCell } from "./format.js";
import { pinned } from "./versions.js";

const TERMINAL = new Set(["completed", "failed", "cancelled", "compensated", "compensation_failed"]);
const PAUSABLE = new Set(["running", "waiting"]);
const REDRIVABLE = new Set(["failed", "cancelled", "compensation_failed"]);

function runLink(id) {
  return h("a", { href: "#/runs/" + encodeURIComponent(id), class: "mono" }, id);
}

function refusal(error) {
  return error instanceof ApiError && error.code ? `${error.message} (${error.code})` : error.message;
}

// What operators did to the run, as rows of its facts (none when nothing was done).
export function operationFacts(run) {
  const row = (label, value) => [h("dt", {}, label), h("dd", {}, value)];
  const rows = [];
  if (run.pause) {
    const reason = run.pause.reason ? `: ${run.pause.reason}` : "";
    rows.push(row("Paused", h("span", { id: "run-paused" }, "paused since ", timeCell(run.pause.at),
      ` (${formatTime(run.pause.at)}) by ${run.pause.by}${reason}`)));
  }
  if (run.redriveCount) {
    rows.push(row("Redriven", h("span", { id: "run-redrives" }, `${run.redriveCount} time${run.redriveCount === 1 ? "" : "s"}`)));
  }
  if (run.rerunOf) {
    rows.push(row("Rerun of", h("span", { id: "run-rerun-of" }, runLink(run.rerunOf.runId),
      " from step ", h("code", {}, run.rerunOf.fromStep))));
  }
  if ((run.reruns || []).length) {
    rows.push(row("Reruns", h("ul", { id: "run-reruns" }, run.reruns.map((id) => h("li", {}, runLink(id))))));
  }
  return rows;
}

// Pause / Resume / Redrive / Cancel, each only where it applies; null for an ended run that
// cannot be redriven.
export function actionsPanel(run, refresh) {
  const reason = h("input", { id: "cancel-reason", placeholder: "optional", size: 30 });
  const status = h("p", { class: "field-error", role: "alert", id: "action-error" });
  const act = async (action, body, done) => {
    status.textContent = "";
    const text = reason.value.trim();
    try {
      await api(runPath(run.id) + "/" + action, { method: "POST", body: text ? { ...body, reason: text } : body });
      toast(done);
      refresh();
    } catch (error) {
      status.textContent = refusal(error);
    }
  };
  const buttons = [];
  if (PAUSABLE.has(run.status)) {
    buttons.push(h("button", { type: "button", id: "pause-run", onclick: () => act("pause", {}, "Paused") }, "Pause"));
  }
  if (run.status === "paused") {
    buttons.push(h("button", { type: "button", class: "primary", id: "resume-run", onclick: () => act("resume", {}, "Resumed") }, "Resume"));
  }
  let retryRow = null;
  if (REDRIVABLE.has(run.status)) {
    const attempts = h("input", { id: "redrive-retry-max", type: "number", min: "1", max: "1000", placeholder: "the step's own", size: 8 });
    retryRow = h("div", { class: "row" }, h("label", { for: attempts.id }, "Redrive: attempts of the failed step", attempts));
    buttons.push(h("button", { type: "button", class: "primary", id: "redrive-run", onclick: () => {
      const body = {};
      if (attempts.value.trim()) body.retry = { max: Number(attempts.value) };
      act("redrive", body, "Redriven");
    } }, "Redrive"));
  }
  if (!TERMINAL.has(run.status) && pinned(run)) {
    // Prominent while the run waits for a version that may never answer again.
    const upgrade = () => {
      if (window.confirm("Move this run to the current version of its code? Its next invocation runs on the code deployed now.")) {
        act("upgrade", {}, "Moved to the current version");
      }
    };
    buttons.push(h("button", { type: "button", class: run.versionWait ? "primary" : "", id: "upgrade-run", onclick: upgrade }, "Upgrade to current version"));
  }
  if (!TERMINAL.has(run.status)) {
    const cancel = (compensate) => {
      const what = compensate ? "Cancel this run and run its compensations (last in, first out)?" : "Cancel this run without compensating?";
      if (window.confirm(what)) act("cancel", { compensate }, compensate ? "Cancelled; compensations ran" : "Cancelled");
    };
    buttons.push(
      h("button", { type: "button", class: "danger", id: "cancel-run", onclick: () => cancel(false) }, "Cancel run"),
      h("button", { type: "button", class: "danger", id: "cancel-compensate", onclick: () => cancel(true) }, "Cancel with compensation"));
  }
  if (!buttons.length) return null;
  return h("section", { class: "panel", id: "run-actions" }, h("h2", {}, "Actions"),
    h("div", { class: "row" }, h("label", { for: reason.id }, "Reason", reason), ...buttons), retryRow, status);
}

// The dialog of "Rerun from here": the run's input as editable JSON, then the new run.
export function openRerunDialog(run, stepId) {
  const input = h("textarea", { id: "rerun-input", spellcheck: "false", rows: 8, cols: 60 },
    JSON.stringify(run.input === undefined ? null : run.input, null, 2));
  const reason = h("input", { id: "rerun-reason", placeholder: "optional", size: 40 });
  const status = h("p", { class: "field-error", role: "alert", id: "rerun-error" });
  const dialog = h("dialog", { id: "rerun-dialog", "aria-labelledby": "rerun-title" });
  const close = () => { dialog.close(); dialog.remove(); };
  const start = async () => {
    status.textContent = "";
    let value;
    try {
      value = input.value.trim() ? JSON.parse(input.value) : null;
    } catch (error) {
      status.textContent = `The input is not valid JSON: ${error.message}`;
      input.focus();
      return;
    }
    const body = { fromStep: stepId, input: value };
    if (reason.value.trim()) body.reason = reason.value.trim();
    try {
      const created = await api(runPath(run.id) + "/rerun", { method: "POST", body });
      close();
      toast(`Rerun ${created.id} started`);
      location.hash = "#/runs/" + encodeURIComponent(created.id);
    } catch (error) {
      status.textContent = refusal(error);
    }
  };
  dialog.append(
    h("h2", { id: "rerun-title" }, "Rerun from ", h("code", {}, stepId)),
    h("p", { class: "muted" }, "A new run copies this run's results up to this step, then runs ",
      "it and every step after it again. At-most-once steps from here on run again too."),
    h("label", { for: input.id }, "Input (JSON)", input),
    h("label", { for: reason.id }, "Reason", reason),
    status,
    h("div", { class: "row" },
      h("button", { type: "button", class: "primary", id: "rerun-start", onclick: start }, "Start rerun"),
      h("button", { type: "button", id: "rerun-cancel", onclick: close }, "Close")));
  document.body.append(dialog);
  dialog.showModal();
  input.focus();
  return dialog;
}

// Whether "Rerun from here" is offered: the run ended and the entry is a top-level step.
export function rerunnable(run, entry) {
  return TERMINAL.has(run.status) && entry.type === "step" && entry.topLevel === true && entry.redrive == null;
}
