// Manifests per environment: the current version, its workflows and event filters (predicate
// and input mapper written out readably), and the older versions kept.

import { api, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { formatTime, timeCell } from "./format.js";
import { jsonView } from "./json.js";

const ENVIRONMENTS = ["development", "preview", "production"];
const SYMBOLS = { eq: "=", neq: "≠", gt: ">", gte: "≥", lt: "<", lte: "≤" };

function side(value) {
  if (value && typeof value === "object" && "path" in value) return String(value.path);
  if (value && typeof value === "object" && "lit" in value) return JSON.stringify(value.lit);
  return JSON.stringify(value);
}

// The where DSL as text: data.amount ≥ 100 and data.currency = "EUR".
export function describePredicate(where, nested = false) {
  if (where === undefined || where === null) return "every event";
  if (typeof where !== "object") return JSON.stringify(where);
  const [op] = Object.keys(where);
  const args = where[op];
  if (op in SYMBOLS && Array.isArray(args)) return `${side(args[0])} ${SYMBOLS[op]} ${side(args[1])}`;
  if (op === "in" && Array.isArray(args)) return `${side(args[0])} in ${side(args[1])}`;
  if (op === "exists") return `${side(args)} exists`;
  if (op === "not") return `not (${describePredicate(args, true)})`;
  if ((op === "and" || op === "or") && Array.isArray(args)) {
    const text = args.map((a) => describePredicate(a, true)).join(` ${op} `);
    return nested && args.length > 1 ? `(${text})` : text;
  }
  return JSON.stringify(where);
}

// The input mapper as text: { paymentId: data.id, amount: data.amount }.
export function describeMapper(mapper) {
  if (mapper === undefined || mapper === null) return "the event's data, as it is";
  if (mapper.passthrough) return "the event's data, as it is";
  if ("path" in mapper) return String(mapper.path);
  if ("lit" in mapper) return JSON.stringify(mapper.lit);
  if (mapper.object && typeof mapper.object === "object") {
    return "{ " + Object.entries(mapper.object).map(([k, v]) => `${k}: ${describeMapper(v)}`).join(", ") + " }";
  }
  return JSON.stringify(mapper);
}

function workflowsTable(workflows, environment) {
  if (!workflows.length) return h("p", { class: "muted" }, "This manifest declares no workflow.");
  return h("div", { class: "table-wrap" }, h("table", { id: "manifest-workflows" },
    h("thead", {}, h("tr", {}, ["Workflow", "Version", "Runtime", "Compensation", "Input schema", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, workflows.map((w) => h("tr", {},
      h("td", { class: "mono" }, w.id), h("td", {}, w.version || "—"), h("td", {}, w.defaultRuntime || "—"),
      h("td", {}, w.hasCompensation ? "yes" : "no"),
      h("td", {}, w.inputSchema ? h("details", {}, h("summary", {}, "schema"), jsonView(w.inputSchema)) : h("span", { class: "muted" }, "none")),
      h("td", {}, h("a", { href: `#/start?env=${environment}&workflow=${encodeURIComponent(w.id)}` }, "Start"), " · ",
        h("a", { href: `#/runs?workflow=${encodeURIComponent(w.id)}` }, "Runs")))))));
}

function filtersTable(filters) {
  if (!filters.length) return h("p", { class: "muted" }, "No event filters: events start no runs in this environment.");
  return h("div", { class: "table-wrap" }, h("table", { id: "manifest-filters" },
    h("thead", {}, h("tr", {}, ["Event", "Starts", "When", "With input", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, filters.map((f) => h("tr", {},
      h("td", { class: "mono" }, f.eventType || f.eventName || "—"),
      h("td", { class: "mono" }, f.targetWorkflowId || f.workflowId || "—"),
      h("td", { class: "mono predicate" }, describePredicate(f.where)),
      h("td", { class: "mono mapper" }, describeMapper(f.input)),
      h("td", {}, h("details", {}, h("summary", {}, "JSON"), jsonView(f))))))));
}

export function renderManifests(main, params, ctx) {
  const controller = new AbortController();
  const environment = ENVIRONMENTS.includes(params.get("env")) ? params.get("env") : "development";
  const version = params.get("version");
  document.title = `Manifests · ${environment} · relayflow`;
  const envNav = h("nav", { class: "row", "aria-label": "Environments" }, ENVIRONMENTS.map((e) =>
    h("a", { href: `#/manifests?env=${e}`, class: "button", "aria-current": e === environment ? "page" : null }, e)));
  const body = h("div", {}, h("p", { class: "muted" }, "Loading the manifest…"));
  replace(main, h("h1", {}, "Manifests"), envNav, body);

  const path = version ? `api/manifests/${environment}/versions/${encodeURIComponent(version)}` : `api/manifests/${environment}`;
  Promise.all([
    api(path, { signal: controller.signal }).catch((error) => {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    }),
    api(`api/manifests/${environment}/versions`, { signal: controller.signal }).catch(() => ({ versions: [] })),
  ]).then(([found, history]) => {
    if (!found) {
      replace(body, h("div", { class: "notice", id: "manifest-empty" },
        h("p", {}, h("strong", {}, version ? `${environment} keeps no version ${version}.` : `No manifest is registered for ${environment}.`)),
        h("p", {}, "Register one with ", h("code", {}, `relayflow manifest push --env ${environment}`), ".")));
      return;
    }
    const manifest = found.manifest || {};
    const versions = history.versions || [];
    const isCurrent = versions.some((v) => v.current && v.versionId === found.versionId) || !version;
    replace(body,
      h("section", { class: "panel" },
        h("h2", {}, isCurrent ? "Current version " : "Version ", h("span", { class: "mono", id: "manifest-version" }, found.versionId)),
        manifest.builtAt ? h("p", { class: "muted" }, "Built ", timeCell(manifest.builtAt), ` (${formatTime(manifest.builtAt)})`) : null,
        !isCurrent ? h("p", {}, h("a", { href: `#/manifests?env=${environment}` }, "Back to the current version")) : null),
      h("section", { class: "panel" }, h("h2", {}, "Workflows"), workflowsTable(manifest.workflows || [], environment)),
      h("section", { class: "panel" }, h("h2", {}, "Event filters"), filtersTable(manifest.eventFilters || [])),
      h("section", { class: "panel" }, h("h2", {}, "Versions kept"),
        versions.length ? h("ul", { id: "manifest-versions" }, versions.map((v) => h("li", {},
          h("a", { class: "mono", href: `#/manifests?env=${environment}&version=${encodeURIComponent(v.versionId)}` }, v.versionId),
          v.current ? " (current)" : "", v.builtAt ? [" · built ", timeCell(v.builtAt)] : "",
          ` · ${v.workflows} workflow(s), ${v.eventFilters} filter(s)`)))
          : h("p", { class: "muted" }, "No other version is kept.")),
      h("details", {}, h("summary", {}, "The whole manifest as JSON"), jsonView(manifest)));
  }).catch((error) => {
    if (error.name === "AbortError") return;
    replace(body, ctx.errorState(error, () => ctx.navigate(location.hash)));
  });
  return () => controller.abort();
}
