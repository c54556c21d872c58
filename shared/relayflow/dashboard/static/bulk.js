// Bulk actions: the "Act on all matching…" dialog of the runs list (a dry run's count first,
// then a job started under one Idempotency-Key, so a double click starts one job), the page of
// one bulk job (refreshed until it ends) and the list of bulk jobs.

import { api, ApiError } from "./api.js";
import { h, replace, toast } from "./dom.js";
import { timeCell } from "./format.js";

const ACTIONS = ["cancel", "pause", "resume", "redrive", "rerun", "upgrade"];
const ENDED = new Set(["completed", "failed", "cancelled", "compensated", "compensation_failed"]);
const REFRESH_MS = 1000;
const SHOWN_REASONS = 20;

function refusal(error) {
  return error instanceof ApiError && error.code ? `${error.message} (${error.code})` : error.message;
}

// A fresh key per dialog: retries of the same Start reuse it, a new dialog gets a new one.
function idempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return "dashboard-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function jobHref(jobId) {
  return "#/bulk/" + encodeURIComponent(jobId);
}

// The runs list's filters (its address) as a bulk job's filter.
export function bulkFilter(params) {
  const filter = {};
  if (params.get("environment")) filter.environment = params.get("environment");
  if (params.get("workflow")) filter.workflowId = params.get("workflow");
  if (params.get("status")) filter.statuses = [params.get("status")];
  if (params.get("tag")) filter.tag = params.get("tag");
  if (params.get("version")) filter.codeVersion = params.get("version");
  if (params.get("since")) filter.since = params.get("since");
  if (params.get("until")) filter.until = params.get("until");
  return filter;
}

function filterText(filter) {
  const parts = Object.entries(filter || {})
    .filter(([, value]) => value !== null && value !== undefined && !(Array.isArray(value) && !value.length))
    .map(([key, value]) => `${key}: ${Array.isArray(value) ? value.join(", ") : value}`);
  return parts.length ? parts.join("; ") : "—";
}

// "Act on all matching…": choose the action and a reason, see how many runs match, start.
export function openBulkDialog(params, ctx) {
  const filter = bulkFilter(params);
  const key = idempotencyKey();
  const action = h("select", { id: "bulk-action" }, ACTIONS.map((a) => h("option", { value: a }, a)));
  const fromStep = h("input", { id: "bulk-from-step", size: 20, placeholder: "step id" });
  const fromStepRow = h("label", { for: fromStep.id, hidden: true }, "Rerun from step", fromStep);
  const reason = h("input", { id: "bulk-reason", size: 40, placeholder: "optional" });
  const count = h("p", { id: "bulk-count", "aria-live": "polite" }, "Counting the matching runs…");
  const status = h("p", { class: "field-error", role: "alert", id: "bulk-error" });
  const start = h("button", { type: "button", class: "primary", id: "bulk-start", disabled: true }, "Start");
  const dialog = h("dialog", { id: "bulk-dialog", "aria-labelledby": "bulk-title" });
  const close = () => { dialog.close(); dialog.remove(); };
  let starting = null;

  const body = (dryRun) => {
    const request = { action: action.value, filter, dryRun };
    if (action.value === "rerun") request.options = { fromStep: fromStep.value.trim() };
    if (reason.value.trim()) request.reason = reason.value.trim();
    return request;
  };

  const countMatches = async () => {
    start.disabled = true;
    status.textContent = "";
    fromStepRow.hidden = action.value !== "rerun";
    if (action.value === "rerun" && !fromStep.value.trim()) {
      count.textContent = "Name the step to rerun from.";
      return;
    }
    count.textContent = "Counting the matching runs…";
    try {
      const { matched } = await api("api/bulk-actions", { method: "POST", body: body(true) });
      count.textContent = `${matched} run${matched === 1 ? "" : "s"} match`;
      start.disabled = matched === 0;
    } catch (error) {
      count.textContent = "";
      status.textContent = refusal(error);
    }
  };

  // One request per dialog: a second click waits for the first; the key makes a retry safe.
  const startJob = async () => {
    if (!starting) {
      start.disabled = true;
      status.textContent = "";
      starting = api("api/bulk-actions", { method: "POST", body: body(false), headers: { "Idempotency-Key": key } });
    }
    try {
      const job = await starting;
      close();
      toast(`Bulk ${job.action} started`);
      ctx.navigate(jobHref(job.jobId));
    } catch (error) {
      starting = null;
      start.disabled = false;
      status.textContent = refusal(error);
    }
  };

  action.addEventListener("change", countMatches);
  fromStep.addEventListener("change", countMatches);
  start.addEventListener("click", startJob);
  dialog.append(
    h("h2", { id: "bulk-title" }, "Act on all matching runs"),
    h("p", { class: "muted" }, "Runs matching ", h("span", { id: "bulk-filter", class: "mono" }, filterText(filter)),
      ". A bulk job acts on them page by page; runs the action does not fit are skipped with the reason."),
    h("label", { for: action.id }, "Action", action),
    fromStepRow,
    h("label", { for: reason.id }, "Reason", reason),
    count, status,
    h("div", { class: "row" }, start,
      h("button", { type: "button", id: "bulk-close", onclick: close }, "Close")));
  document.body.append(dialog);
  dialog.showModal();
  countMatches();
  return dialog;
}

function jobFacts(job) {
  const row = (label, id, value) => [h("dt", {}, label), h("dd", { id }, value)];
  return h("dl", { class: "facts", id: "bulk-job-facts" },
    row("Status", "bulk-job-status", job.status),
    row("Action", "bulk-job-action", job.action),
    row("Filter", "bulk-job-filter", filterText(job.filter)),
    row("Matched", "bulk-job-matched", String(job.matched)),
    row("Done", "bulk-job-done", String(job.done)),
    row("Skipped", "bulk-job-skipped", String(job.skipped)),
    row("Failed", "bulk-job-failed", String(job.failed)),
    row("By", "bulk-job-by", job.by),
    row("Reason", "bulk-job-reason", job.reason || "—"),
    row("Started", "bulk-job-started", timeCell(job.startedAt)),
    row("Ended", "bulk-job-ended", job.completedAt ? timeCell(job.completedAt) : "—"));
}

function reasonsTable(reasons) {
  if (!reasons.length) return null;
  const shown = reasons.slice(0, SHOWN_REASONS);
  return h("section", { class: "panel" }, h("h2", {}, "Skipped or failed"),
    h("div", { class: "table-wrap" }, h("table", { id: "bulk-job-reasons" },
      h("caption", { class: "muted" }, `the first ${shown.length} of ${reasons.length}`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Run"), h("th", { scope: "col" }, "Outcome"),
        h("th", { scope: "col" }, "Code"), h("th", { scope: "col" }, "Why"))),
      h("tbody", {}, shown.map((r) => h("tr", {},
        h("td", {}, h("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.runId) }, r.runId)),
        h("td", {}, r.outcome), h("td", { class: "mono" }, r.code), h("td", {}, r.message)))))));
}

// One bulk job: its progress, refreshed until it ends, and "Cancel job" while it runs.
export function renderBulkJob(main, jobId, ctx) {
  const controller = new AbortController();
  const view = h("div", { id: "bulk-job", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading the job…"));
  const status = h("p", { class: "field-error", role: "alert", id: "bulk-job-error" });
  let timer = 0;
  let stopped = false;
  replace(main, h("p", {}, h("a", { href: "#/bulk" }, "← Bulk jobs")),
    h("h1", {}, "Bulk job ", h("span", { class: "mono" }, jobId)), status, view);
  document.title = "Bulk job · relayflow";

  const cancelJob = async () => {
    if (!window.confirm("Cancel this bulk job? The page in flight finishes; no other page starts.")) return;
    status.textContent = "";
    try {
      await api("api/bulk-actions/" + encodeURIComponent(jobId) + "/cancel", { method: "POST", body: {} });
      toast("Bulk job cancelled");
      load();
    } catch (error) {
      status.textContent = refusal(error);
    }
  };

  async function load() {
    clearTimeout(timer);
    if (stopped) return;
    try {
      const job = await api("api/bulk-actions/" + encodeURIComponent(jobId), { signal: controller.signal });
      const ended = ENDED.has(job.status);
      replace(view, jobFacts(job),
        ended ? null : h("p", {}, h("button", { type: "button", class: "danger", id: "bulk-job-cancel", onclick: cancelJob }, "Cancel job")),
        reasonsTable(job.reasons || []));
      if (!ended && !stopped) timer = setTimeout(load, REFRESH_MS);
    } catch (error) {
      if (error.name === "AbortError") return;
      replace(view, ctx.errorState(error, load));
    }
  }

  load();
  return () => { stopped = true; clearTimeout(timer); controller.abort(); };
}

// Every bulk job, newest first, paged by cursor.
export function renderBulkJobs(main, params, ctx) {
  const controller = new AbortController();
  const cursor = params.get("cursor") || undefined;
  const list = h("div", { id: "bulk-jobs", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading the bulk jobs…"));
  replace(main, h("h1", {}, "Bulk jobs"),
    h("p", { class: "muted" }, "Jobs acting on every run a filter matched, newest first. Start one from the runs list: filter it, then ",
      h("em", {}, "Act on all matching…"), "."), list);
  document.title = "Bulk jobs · relayflow";

  function show(page) {
    const jobs = page.jobs || [];
    if (!jobs.length) {
      replace(list, h("div", { class: "notice", id: "bulk-jobs-empty" }, h("p", {}, h("strong", {}, "No bulk job yet."))));
      return;
    }
    const rows = jobs.map((job) => h("tr", { dataset: { jobId: job.jobId } },
      h("td", {}, h("a", { class: "mono", href: jobHref(job.jobId) }, job.jobId)),
      h("td", {}, job.action), h("td", {}, job.status),
      h("td", { class: "hide-narrow mono" }, filterText(job.filter)),
      h("td", {}, `${job.done} / ${job.matched}`),
      h("td", { class: "hide-narrow" }, `${job.skipped} skipped, ${job.failed} failed`),
      h("td", {}, timeCell(job.startedAt)), h("td", { class: "hide-narrow" }, job.by)));
    replace(list, h("div", { class: "table-wrap" }, h("table", { id: "bulk-jobs-table" },
      h("caption", { class: "muted" }, `${jobs.length} job${jobs.length === 1 ? "" : "s"}, newest first`),
      h("thead", {}, h("tr", {}, ["Job", "Action", "Status", "Filter", "Done", "Skipped / failed", "Started", "By"]
        .map((label, i) => h("th", { scope: "col", class: [3, 5, 7].includes(i) ? "hide-narrow" : undefined }, label)))),
      h("tbody", {}, rows))),
    h("nav", { class: "pager", "aria-label": "Pages" },
      cursor ? h("a", { class: "button", rel: "first", href: "#/bulk" }, "Newest") : null,
      page.nextCursor
        ? h("a", { class: "button", rel: "next", href: "#/bulk?cursor=" + encodeURIComponent(page.nextCursor) }, "Older →")
        : h("span", { class: "muted" }, "This is the last page.")));
  }

  function load() {
    api("api/bulk-actions", { signal: controller.signal, query: { cursor, limit: 50 } })
      .then(show)
      .catch((error) => { if (error.name !== "AbortError") replace(list, ctx.errorState(error, load)); });
  }

  load();
  return () => controller.abort();
}
