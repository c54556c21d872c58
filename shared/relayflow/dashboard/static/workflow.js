// The workflow pages: "#/workflows" (the environment's workflows) and "#/workflows/<id>" (its
// runs that ended in a range: success rate, duration and cost per run, an hourly chart, and
// its queued, delayed and paused runs now), from GET /api/workflows/{id}/stats.

import { api } from "./api.js";
import { h, replace, svg } from "./dom.js";
import { formatDuration, formatTime } from "./format.js";
import { runsTable, statusBadge } from "./runs.js";

const ENVIRONMENTS = ["production", "preview", "development"];
const RANGES = [["1h", "last hour"], ["6h", "last 6 hours"], ["24h", "last 24 hours"], ["7d", "last 7 days"], ["31d", "last 31 days"]];
const REFRESH_MS = 15000;
// Outcomes drawn in the chart, bottom up: the statuses each adds up and its colour class.
const OUTCOMES = [
  ["completed", ["completed"], "ok"],
  ["failed", ["failed", "compensation_failed"], "err"],
  ["cancelled or compensated", ["cancelled", "compensated"], "other"],
];

function workflowHref(workflowId, environment) {
  return "#/workflows/" + encodeURIComponent(workflowId) + "?environment=" + encodeURIComponent(environment);
}

function workflowLink(workflowId, environment) {
  return h("a", { href: workflowHref(workflowId, environment), class: "workflow-link" }, workflowId);
}

function percent(value) {
  return value === null || value === undefined ? "—" : `${(value * 100).toFixed(1)} %`;
}

function dollars(value) {
  if (value === null || value === undefined) return "—";
  return value >= 0.01 ? `$${value.toFixed(4)}` : `$${value.toPrecision(3)}`;
}

function figure(id, label, value, detail) {
  return h("div", { class: "figure", id },
    h("div", { class: "figure-label" }, label),
    h("div", { class: "figure-value" }, value),
    detail ? h("div", { class: "figure-detail muted" }, detail) : null);
}

function figures(stats) {
  const d = stats.durationMs;
  const c = stats.costUsd;
  const ended = Object.entries(stats.byStatus).filter(([, n]) => n)
    .map(([status, n]) => h("span", {}, statusBadge(status), ` ${n} `));
  return h("div", { class: "figures" },
    figure("stat-runs", "Runs ended", String(stats.runs), ended.length ? ended : "none in this range"),
    figure("stat-success", "Success rate", percent(stats.successRate), "completed over ended"),
    figure("stat-duration", "Duration p50 / p95", `${formatDuration(d.p50)} / ${formatDuration(d.p95)}`,
      d.mean === null ? null : `mean ${formatDuration(d.mean)}`),
    figure("stat-cost", "Cost per run p50 / p95", c.runs ? `${dollars(c.p50)} / ${dollars(c.p95)}` : "not recorded",
      c.runs ? `mean ${dollars(c.mean)} over ${c.runs} runs, ${dollars(c.total)} in all` : "no run in this range has recorded usage"));
}

function hourLabel(ms) {
  const date = new Date(ms);
  return `${String(date.getHours()).padStart(2, "0")}:00`;
}

function hourTitle(hour) {
  const parts = OUTCOMES.map(([label, statuses]) => [label, statuses.reduce((n, s) => n + (hour.byStatus[s] || 0), 0)])
    .filter(([, n]) => n).map(([label, n]) => `${n} ${label}`);
  const durations = hour.runs ? `; p50 ${formatDuration(hour.durationP50Ms)}, p95 ${formatDuration(hour.durationP95Ms)}` : "";
  return `${formatTime(hour.hour)}: ${hour.runs} run${hour.runs === 1 ? "" : "s"}${parts.length ? " (" + parts.join(", ") + ")" : ""}${durations}`;
}

// Stacked bars of the runs that ended each hour, by outcome; a bar's title says its figures.
export function hourlyChart(hours) {
  // Wide bars for a few hours, thin ones for a month; the chart scales down to fit.
  const gap = 2;
  const barWidth = Math.max(4, Math.min(48, Math.floor(720 / hours.length) - gap));
  const height = 120;
  const top = 14;
  const bottom = 18;
  const left = 30;
  const most = Math.max(1, ...hours.map((hour) => hour.runs));
  // Room on the right for the last hour's label.
  const width = left + hours.length * (barWidth + gap) + 24;
  const scale = (n) => (n / most) * height;
  const bars = hours.map((hour, index) => {
    const x = left + index * (barWidth + gap);
    let y = top + height;
    const pieces = OUTCOMES.map(([, statuses, cls]) => {
      const n = statuses.reduce((sum, s) => sum + (hour.byStatus[s] || 0), 0);
      if (!n) return null;
      y -= scale(n);
      return svg("rect", { class: `bar-${cls}`, x, y, width: barWidth, height: scale(n) });
    });
    return svg("g", { class: "hour", "data-runs": hour.runs, "data-hour": hour.hour },
      svg("title", {}, hourTitle(hour)),
      svg("rect", { class: "hour-hit", x, y: top, width: barWidth, height }),
      pieces);
  });
  // Hour labels at least 40 px apart.
  const labelEvery = Math.max(1, Math.ceil(40 / (barWidth + gap)));
  const labels = hours.map((hour, index) => index % labelEvery ? null
    : svg("text", { x: left + index * (barWidth + gap), y: top + height + 13 }, hourLabel(hour.hour)));
  return h("figure", { class: "chart-wrap" },
    svg("svg", {
      class: "hourly", id: "hourly-chart", role: "img", viewBox: `0 0 ${width} ${top + height + bottom}`,
      width, height: top + height + bottom,
      "aria-label": `Runs ended per hour, ${hours.length} hours, at most ${most} in one hour`,
    },
    svg("line", { class: "grid", x1: left, x2: width, y1: top, y2: top }),
    svg("line", { class: "grid", x1: left, x2: width, y1: top + height, y2: top + height }),
    svg("text", { class: "axis", x: 0, y: top + 4 }, String(most)),
    svg("text", { class: "axis", x: 0, y: top + height }, "0"),
    bars, labels),
    h("figcaption", { class: "legend" },
      OUTCOMES.map(([label, , cls]) => h("span", {}, h("i", { class: cls }), label)),
      h("span", {}, "hover a bar for its hour's durations")));
}

function waitingSection(group, workflowId, environment) {
  const title = `${group.count}${group.capped ? "+" : ""} ${group.status}`;
  return h("section", { class: "waiting", id: `waiting-${group.status}` },
    h("h3", {}, statusBadge(group.status), " ", title),
    group.runs.length ? runsTable(group.runs) : h("p", { class: "muted" }, `No ${group.status} run.`),
    group.count > group.runs.length
      ? h("p", {}, h("a", { href: `#/runs?workflow=${encodeURIComponent(workflowId)}&environment=${environment}&status=${group.status}` }, `All ${group.status} runs…`))
      : null);
}

function controls(workflowId, environment, range, ctx) {
  const envSelect = h("select", { id: "stats-environment", name: "environment" },
    ENVIRONMENTS.map((env) => h("option", { value: env, selected: env === environment }, env)));
  const rangeSelect = h("select", { id: "stats-range", name: "range" },
    RANGES.map(([value, label]) => h("option", { value, selected: value === range }, label)));
  const go = () => ctx.navigate(`${workflowHref(workflowId, envSelect.value)}&range=${rangeSelect.value}`);
  envSelect.addEventListener("change", go);
  rangeSelect.addEventListener("change", go);
  return h("div", { class: "filters" },
    h("label", { for: "stats-environment" }, "Environment", envSelect),
    h("label", { for: "stats-range" }, "Runs that ended in the", rangeSelect),
    h("a", { class: "button", id: "workflow-runs", href: `#/runs?workflow=${encodeURIComponent(workflowId)}&environment=${environment}` }, "All its runs"));
}

export function renderWorkflow(main, workflowId, params, ctx) {
  const environment = ENVIRONMENTS.includes(params.get("environment")) ? params.get("environment") : "production";
  const range = RANGES.some(([value]) => value === params.get("range")) ? params.get("range") : "24h";
  const body = h("div", { id: "workflow-stats", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading figures…"));
  const controller = new AbortController();
  let timer = 0;
  let lastBody = "";
  replace(main,
    h("p", {}, h("a", { href: "#/workflows?environment=" + environment }, "← Workflows")),
    h("h1", {}, "Workflow ", h("span", { class: "mono", id: "workflow-id" }, workflowId)),
    controls(workflowId, environment, range, ctx),
    body);
  document.title = `${workflowId} · relayflow`;

  function show(stats) {
    replace(body,
      h("p", { class: "muted", id: "stats-range-text" },
        `Runs that ended from ${formatTime(stats.since)} to ${formatTime(stats.until)} (whole hours), in ${stats.environment}.`),
      figures(stats),
      h("h2", {}, "Per hour"),
      hourlyChart(stats.hours),
      h("h2", {}, "Waiting now"),
      h("div", { class: "waiting-groups" }, stats.waiting.map((group) => waitingSection(group, workflowId, environment))));
  }

  async function load() {
    clearTimeout(timer);
    try {
      const stats = await api(`api/workflows/${encodeURIComponent(workflowId)}/stats`, {
        signal: controller.signal, query: { environment, from: range },
      });
      const text = JSON.stringify({ ...stats, since: 0, until: 0 });
      if (text !== lastBody) { lastBody = text; show(stats); }
    } catch (error) {
      if (error.name === "AbortError") return;
      replace(body, ctx.errorState(error, load));
      lastBody = "";
    }
    timer = setTimeout(load, REFRESH_MS);
  }

  load();
  return () => { clearTimeout(timer); controller.abort(); };
}

export function renderWorkflows(main, params, ctx) {
  const environment = ENVIRONMENTS.includes(params.get("environment")) ? params.get("environment") : "production";
  const list = h("div", { id: "workflows-list" }, h("p", { class: "muted" }, "Loading workflows…"));
  const controller = new AbortController();
  const envSelect = h("select", { id: "workflows-environment" },
    ENVIRONMENTS.map((env) => h("option", { value: env, selected: env === environment }, env)));
  envSelect.addEventListener("change", () => ctx.navigate("#/workflows?environment=" + envSelect.value));
  replace(main, h("h1", {}, "Workflows"),
    h("div", { class: "filters" }, h("label", { for: "workflows-environment" }, "Environment", envSelect)),
    list);
  document.title = "Workflows · relayflow";

  async function load() {
    try {
      const found = await api("api/manifests/" + environment, { signal: controller.signal });
      const workflows = (found.manifest.workflows || []).map((w) => w.id).sort();
      replace(list, workflows.length
        ? h("ul", { class: "workflow-list" }, workflows.map((id) => h("li", {}, workflowLink(id, environment))))
        : h("p", { class: "muted" }, `No workflow is registered in ${environment}.`));
    } catch (error) {
      if (error.name === "AbortError") return;
      if (error.status === 404) {
        replace(list, h("div", { class: "notice" }, h("p", {}, `No manifest is registered in ${environment}. `,
          "Open a workflow from the runs list, or register a manifest (", h("code", {}, "relayflow deploy"), ").")));
        return;
      }
      replace(list, ctx.errorState(error, load));
    }
  }

  load();
  return () => controller.abort();
}
