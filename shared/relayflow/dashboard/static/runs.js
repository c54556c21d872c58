// The runs list: filters in the address, cursor paging, newest first, refreshed while open.

import { api, ApiError } from "./api.js";
import { openBulkDialog } from "./bulk.js";
import { h, replace } from "./dom.js";
import { formatDuration, timeCell } from "./format.js";
import { versionBadge } from "./versions.js";
import { workflowPausePanel } from "./workflow_pause.js";

export const STATUSES = ["queued", "delayed", "paused", "running", "waiting", "completed", "failed", "cancelled", "compensated", "compensation_failed"];
const ENVIRONMENTS = ["development", "preview", "production"];
const PAGE_SIZES = [25, 50, 100, 500];
const REFRESH_MS = 5000;
// Cursors of the pages before the current one, per filter set (for "Newer").
const history = new Map();

export function statusBadge(status) {
  return h("span", { class: `badge s-${status}` }, status.replace("_", " "));
}

function toIso(local) {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

function toLocalInput(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const shifted = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
  return shifted.toISOString().slice(0, 16);
}

const COLUMNS = ["Run", "Workflow", "Status", "Started", "Duration", "Tags", "Version"];
// Parents whose child runs are shown, kept across refreshes of the list.
const expanded = new Set();

function runRow(run, depth, expander, childOf) {
  const link = h("a", { href: "#/runs/" + encodeURIComponent(run.id), class: "mono" }, run.id);
  const parent = childOf ? h("span", { class: "child-of muted" }, "child of ",
    h("a", { href: "#/runs/" + encodeURIComponent(childOf), class: "mono" }, childOf)) : null;
  return h("tr", { class: depth ? `child-row depth-${Math.min(depth, 3)}` : null, dataset: { runId: run.id } },
    h("td", { class: "run-id" }, expander, link, parent),
    h("td", { class: "run-workflow" }, h("a", { class: "workflow-link", href: "#/workflows/" + encodeURIComponent(run.workflowId) + "?environment=" + encodeURIComponent(run.environment) }, run.workflowId)),
    h("td", { class: "run-status" }, statusBadge(run.status)),
    h("td", { class: "run-started" }, timeCell(run.startedAt)),
    h("td", { class: "hide-narrow" }, run.completedAt ? formatDuration(run.completedAt - run.startedAt) : "—"),
    h("td", { class: "hide-narrow" }, (run.tags || []).map((t) => h("span", { class: "tag" }, t))),
    h("td", { class: "hide-narrow" }, versionBadge(run)));
}

// The children of ``parent``: every one the API lists (those of other pages too), else the
// ones of this page.
async function childrenOf(parent, known) {
  try {
    const page = await api("api/runs", { query: { parent: parent.id, since: parent.startedAt, environment: parent.environment, limit: 100 } });
    return page.runs && page.runs.length ? page.runs : known;
  } catch {
    return known;
  }
}

// A run's rows: its own, then (hidden until expanded) its children's, nested.
function familyRows(run, byParent, depth, childOf) {
  const known = byParent.get(run.id) || [];
  if (!known.length) return [runRow(run, depth, null, childOf)];
  const holder = [];
  const toggle = h("button", { type: "button", class: "expander", "aria-expanded": "false",
    "aria-label": `Show the child runs of ${run.id}` }, `▸ ${known.length}`);
  const row = runRow(run, depth, toggle, childOf);
  const show = async (open) => {
    toggle.setAttribute("aria-expanded", String(open));
    toggle.firstChild.textContent = `${open ? "▾" : "▸"} ${holder.length || known.length}`;
    for (const child of holder) child.hidden = !open;
    if (!open || toggle.dataset.loaded) return;
    toggle.dataset.loaded = "1";
    const children = await childrenOf(run, known);
    for (const old of holder) old.remove();
    holder.length = 0;
    let after = row;
    for (const child of children) {
      for (const line of familyRows(child, byParent, depth + 1, null)) {
        line.hidden = toggle.getAttribute("aria-expanded") !== "true";
        after.after(line);
        after = line;
        holder.push(line);
      }
    }
    toggle.firstChild.textContent = `${toggle.getAttribute("aria-expanded") === "true" ? "▾" : "▸"} ${children.length}`;
  };
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    if (open) expanded.add(run.id); else expanded.delete(run.id);
    show(open);
  });
  for (const child of known) holder.push(...familyRows(child, byParent, depth + 1, null));
  for (const line of holder) line.hidden = true;
  if (expanded.has(run.id)) queueMicrotask(() => show(true));
  return [row, ...holder];
}

// Child runs sit under their parent when it is on the page (an expander shows them); a child
// whose parent is not on the page is a row of its own that names it.
export function runsTable(runs) {
  const ids = new Set(runs.map((r) => r.id));
  const byParent = new Map();
  for (const run of runs) {
    if (run.parentRunId && ids.has(run.parentRunId)) {
      if (!byParent.has(run.parentRunId)) byParent.set(run.parentRunId, []);
      byParent.get(run.parentRunId).push(run);
    }
  }
  const top = runs.filter((r) => !(r.parentRunId && ids.has(r.parentRunId)));
  const rows = top.flatMap((run) => familyRows(run, byParent, 0, run.parentRunId || null));
  return h("div", { class: "table-wrap" }, h("table", { id: "runs-table" },
    h("caption", { class: "muted" }, `${runs.length} run${runs.length === 1 ? "" : "s"}, newest first`),
    h("thead", {}, h("tr", {}, COLUMNS.map((title, i) => h("th", { scope: "col", class: i > 3 ? "hide-narrow" : null }, title)))),
    h("tbody", {}, rows)));
}

function statusCounts(runs) {
  const counts = new Map();
  for (const run of runs) counts.set(run.status, (counts.get(run.status) || 0) + 1);
  return h("div", { class: "counts", id: "status-counts", "aria-label": "Runs on this page by status" },
    STATUSES.filter((s) => counts.has(s)).map((s) => h("span", {}, statusBadge(s), ` ${counts.get(s)}`)));
}

function filterForm(params, ctx) {
  const field = (name, label, input) => {
    input.name = name;
    input.id = `f-${name}`;
    return h("label", { for: input.id }, label, input);
  };
  const select = (options, value, blank) => h("select", {},
    h("option", { value: "" }, blank), options.map((o) => h("option", { value: o, selected: o === value }, o.replace("_", " "))));
  const form = h("form", { class: "filters", role: "search", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const query = new URLSearchParams();
    for (const [key, value] of data.entries()) {
      const text = String(value).trim();
      if (!text) continue;
      query.set(key, key === "since" || key === "until" ? toIso(text) || "" : text);
    }
    const q = query.get("q");
    if (q) { ctx.navigate("#/runs/" + encodeURIComponent(q)); return; }
    ctx.navigate("#/runs" + (query.size ? "?" + query.toString() : ""));
  } },
  field("q", "Run id", h("input", { type: "search", placeholder: "run_…", size: 22 })),
  field("workflow", "Workflow", h("input", { value: params.get("workflow") || "", size: 16, list: "workflow-ids" })),
  h("datalist", { id: "workflow-ids" }),
  field("status", "Status", select(STATUSES, params.get("status"), "any")),
  field("tag", "Tag", h("input", { value: params.get("tag") || "", size: 10 })),
  field("version", "Build", h("input", { value: params.get("version") || "", size: 12, placeholder: "any" })),
  field("environment", "Environment", select(ENVIRONMENTS, params.get("environment"), "any")),
  field("since", "Started after", h("input", { type: "datetime-local", value: toLocalInput(params.get("since")) })),
  field("until", "Started before", h("input", { type: "datetime-local", value: toLocalInput(params.get("until")) })),
  field("limit", "Per page", h("select", {}, PAGE_SIZES.map((n) => h("option", {
    value: String(n), selected: String(n) === (params.get("limit") || "50") }, String(n))))),
  h("button", { type: "submit", class: "primary" }, "Apply"),
  h("a", { href: "#/runs", class: "button" }, "Clear"));
  return form;
}

export function renderRuns(main, params, ctx) {
  const filters = {
    workflowId: params.get("workflow") || undefined,
    status: params.get("status") || undefined,
    tag: params.get("tag") || undefined,
    codeVersion: params.get("version") || undefined,
    environment: params.get("environment") || undefined,
    since: params.get("since") || undefined,
    until: params.get("until") || undefined,
    limit: Number(params.get("limit")) || 50,
  };
  const cursor = params.get("cursor") || undefined;
  const key = JSON.stringify(filters);
  const previous = history.get(key) || [];
  const list = h("div", { id: "runs-list", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading runs…"));
  const live = h("span", { class: "live", id: "live" }, "live");
  const pause = h("button", { type: "button", "aria-pressed": "false" }, "Pause updates");
  let paused = false;
  let timer = 0;
  let stopped = false;
  let lastBody = "";
  const controller = new AbortController();

  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume updates" : "Pause updates";
    pause.setAttribute("aria-pressed", String(paused));
    live.hidden = paused;
    if (!paused) load();
  });

  replace(main,
    h("div", { class: "row spread" }, h("h1", {}, "Runs"), h("div", { class: "row" }, live, pause,
      h("a", { href: "#/start", class: "button primary" }, "Start a run"))),
    filterForm(params, ctx),
    h("div", { id: "runs-operations" },
      h("button", { type: "button", id: "bulk-open", onclick: () => openBulkDialog(params, ctx) }, "Act on all matching…"),
      filters.workflowId ? workflowPausePanel(filters.workflowId, filters.environment || "development", controller.signal) : null),
    list);
  document.title = "Runs · relayflow";

  api("api/manifests/" + (filters.environment || "development"), { signal: controller.signal })
    .then((found) => {
      const datalist = document.getElementById("workflow-ids");
      if (datalist) replace(datalist, (found.manifest.workflows || []).map((w) => h("option", { value: w.id })));
    })
    .catch(() => {});

  function pageLink(label, target, rel) {
    const query = new URLSearchParams(params);
    query.delete("cursor");
    if (target) query.set("cursor", target);
    return h("a", { class: "button", rel, href: "#/runs" + (query.size ? "?" + query.toString() : "") }, label);
  }

  function show(page) {
    const runs = page.runs || [];
    performance.mark("runs-render-start");
    if (!runs.length) {
      const filtered = Object.entries(filters).some(([k, v]) => v !== undefined && k !== "limit");
      replace(list, h("div", { class: "notice", id: "runs-empty" },
        h("p", {}, h("strong", {}, filtered ? "No run matches these filters." : "No runs yet.")),
        filtered
          ? h("p", {}, "Widen the time range or ", h("a", { href: "#/runs" }, "clear the filters"), ".")
          : h("p", {}, h("a", { href: "#/start" }, "Start a run"), " here, or trigger one with ",
            h("code", {}, "relayflow trigger <workflow> --input '{…}'"), ".")));
    } else {
      const older = page.nextCursor;
      const newerCursor = cursor ? previous[previous.length - 1] : undefined;
      replace(list, statusCounts(runs), runsTable(runs),
        h("nav", { class: "pager", "aria-label": "Pages" },
          cursor ? pageLink("← Newer", newerCursor, "prev") : null,
          cursor ? pageLink("Newest", undefined, "first") : null,
          older ? pageLink("Older →", older, "next") : h("span", { class: "muted", id: "last-page" }, "This is the last page.")));
      for (const link of list.querySelectorAll("a[rel]")) {
        link.addEventListener("click", () => {
          if (link.rel === "next") history.set(key, [...previous, cursor]);
          else if (link.rel === "prev") history.set(key, previous.slice(0, -1));
          else history.set(key, []);
        });
      }
    }
    performance.mark("runs-render-end");
    performance.measure("runs-render", "runs-render-start", "runs-render-end");
  }

  async function load() {
    clearTimeout(timer);
    if (stopped) return;
    try {
      const page = await api("api/runs", {
        signal: controller.signal,
        query: { ...filters, cursor },
      });
      const body = JSON.stringify(page);
      if (body !== lastBody) { lastBody = body; show(page); }
      live.textContent = "live";
    } catch (error) {
      if (error.name === "AbortError") return;
      if (error instanceof ApiError && error.status === 400 && cursor) {
        replace(list, h("div", { class: "notice error" }, h("p", {}, error.message),
          h("p", {}, h("a", { href: "#/runs" }, "Start again from the newest runs"))));
        return;
      }
      replace(list, ctx.errorState(error, load));
      lastBody = "";
    }
    if (!paused && !stopped) timer = setTimeout(() => { if (document.visibilityState === "visible") load(); else timer = setTimeout(load, REFRESH_MS); }, REFRESH_MS);
  }

  load();
  return () => { stopped = true; clearTimeout(timer); controller.abort(); };
}
