// The timeline as a Gantt chart (SVG): one row per step (its attempts side by side, retries and
// failures visible, attempts a redrive took out faded), one per wait and one for the operator
// actions, on a time axis from the run's start. Top-level steps of an ended run can offer
// "Rerun from here".

import { h, svg } from "./dom.js";
import { errorSummary } from "./failures.js";
import { formatDuration, formatTime } from "./format.js";

const ROW = 20;
const AXIS = 26;
const BAR = 12;
const RERUN_WIDTH = 112;

export function waitKind(entry) {
  const prefix = (entry.id || "").split(":")[0];
  if (prefix === "sleep" || prefix === "retry" || prefix === "checkpoint" || prefix === "condition") return prefix;
  return { EVENT: "event", SIGNAL: "signal", MANUAL: "token", RUN: "child", DATETIME: "sleep" }[entry.kind] || prefix || "wait";
}

function rows(entries) {
  const byKey = new Map();
  for (const entry of entries) {
    // Every operator action shares one row.
    const key = entry.type === "action" ? "action" : entry.type + "\u0000" + entry.id;
    let row = byKey.get(key);
    if (!row) {
      const label = entry.type === "step" ? entry.id : entry.type === "action" ? "operator actions" : `${waitKind(entry)} · ${entry.id}`;
      row = { type: entry.type, id: entry.id, label, entries: [] };
      byKey.set(key, row);
    }
    row.entries.push(entry);
  }
  return [...byKey.values()];
}

function niceStep(span) {
  const target = span / 6;
  const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000,
    120000, 300000, 600000, 900000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000];
  return steps.find((s) => s >= target) || Math.ceil(target / 86400000) * 86400000;
}

function isOpen(entry) {
  return entry.endedAt === null || entry.endedAt === undefined;
}

// A wait the run's end cut short ends with the run, outcome "cancelled".
function isAbandoned(entry, finished) {
  return (finished && isOpen(entry)) || (entry.type === "wait" && entry.outcome === "cancelled");
}

const FAILED = new Set(["err", "error", "timed_out"]);

// A failed step attempt that another attempt followed (or follows: the step waits for it) was
// retried: drawn amber, without the cross kept for the attempt that failed the step for good.
function retried(entry, row) {
  if (entry.type !== "step") return false;
  if (entry.outcome === "retrying") return true;
  if (!FAILED.has(entry.outcome)) return false;
  const attempt = entry.attempt ?? 1;
  return row.entries.some((e) => (e.redrive ?? null) === (entry.redrive ?? null) && (e.attempt ?? 1) > attempt);
}

function barClass(entry, finished, row) {
  if (entry.type === "action") return "bar-action";
  if (entry.redrive != null) return "bar-redriven";
  if (isAbandoned(entry, finished)) return "bar-abandoned";
  if (entry.type === "wait") return entry.outcome === "pending" ? "bar-pending" : entry.outcome === "resolved" ? "bar-wait" : `bar-${entry.outcome}`;
  if (retried(entry, row)) return "bar-retrying";
  return `bar-${entry.outcome}`;
}

// A timed-out attempt whose code ran on: the run recorded when that code returned or raised.
function overran(entry) {
  return entry.type === "step" && typeof entry.abandonedEndedAt === "number" && !isOpen(entry);
}

function describeOverrun(entry) {
  return `step ${entry.id}, attempt ${entry.attempt ?? 1}: given up at its timeout, its code ran on ` +
    `${formatDuration(entry.abandonedEndedAt - entry.endedAt)} more and ${entry.abandonedOutcome || "ended"} at ${formatTime(entry.abandonedEndedAt)}`;
}

function describeAction(entry) {
  const reason = entry.reason ? `: ${entry.reason}` : "";
  return `${entry.kind} by ${entry.by} at ${formatTime(entry.startedAt)}${reason}`;
}

function describe(entry, finished) {
  if (entry.type === "action") return describeAction(entry);
  const what = entry.type === "step" ? `step ${entry.id}, attempt ${entry.attempt ?? 1}` : `${waitKind(entry)} wait ${entry.id}`;
  const open = finished ? "never ended: the run ended first" : "still open";
  const span = isOpen(entry) ? open : formatDuration(entry.endedAt - entry.startedAt);
  const error = entry.error ? ` — ${errorSummary(entry.error)}` : "";
  const redriven = entry.redrive != null ? ` (before redrive ${entry.redrive})` : "";
  return `${what}: ${entry.outcome}${redriven} (${span}) from ${formatTime(entry.startedAt)}${entry.source ? `, by ${entry.source}` : ""}${error}`;
}

// An SVG button (keyboard too) at the end of a step's row.
function rerunButton(x, y, stepId, open) {
  const button = svg("g", { class: "rerun-here", role: "button", tabindex: "0", "aria-label": `Rerun from step ${stepId}` },
    svg("rect", { x, y: y + 1, width: RERUN_WIDTH - 8, height: BAR + 4, rx: 3 }),
    svg("text", { x: x + 6, y: y + BAR }, "Rerun from here"));
  button.dataset.step = stepId;
  button.addEventListener("click", open);
  button.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); open(); } });
  return button;
}

// A step's bar opens its detail on click, Enter or Space.
function selectable(bar, entry, onSelect) {
  bar.setAttribute("role", "button");
  bar.setAttribute("tabindex", "0");
  bar.setAttribute("aria-label", `Show step ${entry.id}, attempt ${entry.attempt ?? 1}`);
  bar.classList.add("selectable");
  bar.dataset.step = entry.id;
  bar.dataset.attempt = String(entry.attempt ?? 1);
  bar.addEventListener("click", () => onSelect(entry));
  bar.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); onSelect(entry); } });
}

// ``onSelect(entry)``: opens a step attempt's detail. ``onRerun(entry)``: the handler that reruns from the entry's step, or null where not offered.
export function ganttChart(entries, { start, end, finished = false, width = 900, onRerun = null, onSelect = null }) {
  const list = rows(entries);
  const labelWidth = width < 560 ? 120 : 220;
  const extra = onRerun ? RERUN_WIDTH : 0;
  const plot = Math.max(200, width - labelWidth - 16 - extra);
  const t0 = start;
  let t1 = end;
  for (const entry of entries) t1 = Math.max(t1, entry.endedAt ?? entry.startedAt, overran(entry) ? entry.abandonedEndedAt : 0);
  const span = Math.max(1, t1 - t0);
  const x = (t) => labelWidth + ((t - t0) / span) * plot;
  const height = AXIS + list.length * ROW + 6;
  const chart = svg("svg", { class: "gantt", width: labelWidth + plot + 16 + extra, height, role: onRerun || onSelect ? "group" : "img",
    "aria-label": `Timeline: ${list.length} rows over ${formatDuration(span)}` });
  const axis = svg("g", { class: "axis" });
  const step = niceStep(span);
  for (let t = 0; t <= span; t += step) {
    const px = x(t0 + t);
    axis.append(svg("line", { class: "grid", x1: px, x2: px, y1: AXIS - 6, y2: height }),
      svg("text", { x: px + 2, y: 14 }, t === 0 ? "0" : "+" + formatDuration(t)));
  }
  chart.append(axis);
  const body = svg("g", {});
  list.forEach((row, index) => {
    const y = AXIS + index * ROW;
    const group = svg("g", { class: "row" });
    const label = row.label.length > (labelWidth / 6.5) ? row.label.slice(0, Math.floor(labelWidth / 6.5) - 1) + "…" : row.label;
    group.append(svg("text", { x: 4, y: y + BAR }, svg("title", {}, row.label), label));
    for (const entry of row.entries) {
      const open = isOpen(entry);
      // A rerun's copied steps ran in the original, before this run started: drawn as a
      // sliver at its start rather than off the axis.
      const copied = !open && entry.endedAt < t0;
      const startX = x(Math.max(entry.startedAt, t0));
      const endX = x(open ? t1 : Math.max(entry.endedAt, t0));
      const w = entry.type === "action" ? 4 : Math.max(3, endX - startX);
      if (overran(entry)) {
        // Drawn first, under the attempt's own bar: a faint tail to when its code really ended.
        group.append(svg("rect", { class: "bar-overrun", x: endX, y: y + 5, width: Math.max(2, x(entry.abandonedEndedAt) - endX), height: BAR - 4, rx: 2 },
          svg("title", {}, describeOverrun(entry))));
      }
      const bar = svg("rect", { class: copied ? "bar-copied" : barClass(entry, finished, row), x: startX, y: y + 3, width: w, height: BAR, rx: 2 },
        svg("title", {}, describe(entry, finished) + (retried(entry, row) ? " — retried" : "") + (copied ? " — copied from the run this one reruns" : "")));
      if (onSelect && entry.type === "step") selectable(bar, entry, onSelect);
      group.append(bar);
      if (entry.type === "action") {
        group.append(svg("text", { x: startX + 6, y: y + BAR, class: "action-label" }, entry.kind));
      }
      if (entry.type === "step" && (entry.attempt ?? 1) > 1) {
        group.append(svg("text", { x: startX + 2, y: y + BAR, class: "attempt" }, `#${entry.attempt}`));
      }
      if (FAILED.has(entry.outcome) && !retried(entry, row)) {
        group.append(svg("text", { x: startX + w + 2, y: y + BAR + 1, class: "fail-mark" }, "✕"));
      }
    }
    const current = row.type === "step" ? row.entries.find((e) => e.redrive == null) : null;
    const open = current && onRerun ? onRerun(current) : null;
    if (open) group.append(rerunButton(labelWidth + plot + 16, y, row.id, open));
    body.append(group);
  });
  chart.append(body);
  return chart;
}

export function legend() {
  const item = (cls, text) => h("span", {}, h("i", { class: cls }), text);
  return h("div", { class: "legend", "aria-hidden": "true" },
    item("ok", "step ok"), item("err", "step failed ✕"), item("retrying", "failed, retried"),
    item("started", "step running"), item("wait", "wait resolved"), item("pending", "wait pending"),
    item("abandoned", "never ended (the run ended first)"),
    item("overrun", "timed out, its code ran on"), item("redriven", "failed, before a redrive"),
    item("action", "operator action"), item("copied", "copied by a rerun"));
}

function what(e) {
  if (e.type === "step") return `${e.id} #${e.attempt ?? 1}${e.redrive != null ? ` (before redrive ${e.redrive})` : ""}`;
  if (e.type === "action") return `${e.kind} (action)`;
  return `${waitKind(e)} ${e.id}`;
}

function detail(e) {
  if (e.type === "action") return `by ${e.by}${e.reason ? `: ${e.reason}` : ""}`;
  return [e.error ? errorSummary(e.error) : e.source || "",
    overran(e) ? ` — its code ran on: ${e.abandonedOutcome || "ended"} at ${formatTime(e.abandonedEndedAt)}` : ""].join("");
}

export function timelineTable(entries, { onRerun = null, onSelect = null } = {}) {
  const offered = new Set();
  const rerunCell = (e) => {
    const open = onRerun && !offered.has(e.id) ? onRerun(e) : null;
    if (!open) return h("td", {});
    offered.add(e.id);
    return h("td", {}, h("button", { type: "button", class: "link", onclick: open }, "Rerun from here"));
  };
  const headers = ["What", "Outcome", "Started", "Took", "Detail", ...(onRerun ? [""] : [])];
  return h("div", { class: "table-wrap" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, entries.map((e) => h("tr", {},
      h("td", { class: "mono" }, onSelect && e.type === "step"
        ? h("button", { type: "button", class: "link mono step-open", onclick: () => onSelect(e) }, what(e)) : what(e)),
      h("td", {}, e.outcome),
      h("td", {}, formatTime(e.startedAt)),
      h("td", {}, isOpen(e) ? "open" : formatDuration(e.endedAt - e.startedAt)),
      h("td", {}, detail(e)),
      onRerun ? rerunCell(e) : null)))));
}
