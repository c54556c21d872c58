// The audit log: every operator action (pause, resume, cancel, redrive, rerun, upgrade,
// workflow pauses, bulk jobs), newest first, filtered by kind and workflow in the address, paged by cursor.

import { api, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { timeCell } from "./format.js";

export const KINDS = ["pause", "resume", "cancel", "redrive", "rerun", "upgrade", "pause_workflow", "resume_workflow", "bulk"];
const ENVIRONMENTS = ["development", "preview", "production"];
const PAGE_SIZE = 50;

function kindLabel(kind) {
  return kind.replace("_", " ");
}

function runLink(runId) {
  return runId ? h("a", { class: "mono", href: "#/runs/" + encodeURIComponent(runId) }, runId) : "—";
}

function detailText(detail) {
  const entries = Object.entries(detail || {});
  if (!entries.length) return "";
  return entries.map(([key, value]) => `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`).join(", ");
}

export function auditTable(entries) {
  const rows = entries.map((entry) => h("tr", { dataset: { entryId: entry.id } },
    h("td", {}, timeCell(entry.at)),
    h("td", {}, h("span", { class: `badge audit-kind k-${entry.kind}` }, kindLabel(entry.kind))),
    h("td", {}, entry.by),
    h("td", { class: "hide-narrow" }, entry.environment),
    h("td", {}, entry.workflowId
      ? h("a", { class: "mono", href: `#/audit?workflow=${encodeURIComponent(entry.workflowId)}` }, entry.workflowId)
      : "—"),
    h("td", {}, runLink(entry.runId)),
    h("td", { class: "hide-narrow" }, entry.reason || ""),
    h("td", { class: "hide-narrow mono" }, detailText(entry.detail))));
  return h("div", { class: "table-wrap" }, h("table", { id: "audit-table" },
    h("caption", { class: "muted" }, `${entries.length} action${entries.length === 1 ? "" : "s"}, newest first`),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "When"), h("th", { scope: "col" }, "Action"), h("th", { scope: "col" }, "By"),
      h("th", { scope: "col", class: "hide-narrow" }, "Environment"), h("th", { scope: "col" }, "Workflow"),
      h("th", { scope: "col" }, "Run"), h("th", { scope: "col", class: "hide-narrow" }, "Reason"),
      h("th", { scope: "col", class: "hide-narrow" }, "Detail"))),
    h("tbody", {}, rows)));
}

function filterForm(params, ctx) {
  const field = (name, label, input) => {
    input.name = name;
    input.id = `audit-${name}`;
    return h("label", { for: input.id }, label, input);
  };
  const select = (options, value, blank) => h("select", {},
    h("option", { value: "" }, blank),
    options.map((o) => h("option", { value: o, selected: o === value }, kindLabel(o))));
  const form = h("form", { class: "filters", id: "audit-filters", role: "search", onsubmit: (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [key, value] of new FormData(form).entries()) {
      const text = String(value).trim();
      if (text) query.set(key, text);
    }
    ctx.navigate("#/audit" + (query.size ? "?" + query.toString() : ""));
  } },
  field("kind", "Action", select(KINDS, params.get("kind"), "any")),
  field("workflow", "Workflow", h("input", { value: params.get("workflow") || "", size: 18 })),
  field("environment", "Environment", select(ENVIRONMENTS, params.get("environment"), "any")),
  h("button", { type: "submit", class: "primary" }, "Apply"),
  h("a", { href: "#/audit", class: "button" }, "Clear"));
  return form;
}

export function renderAudit(main, params, ctx) {
  const controller = new AbortController();
  const filters = {
    kind: KINDS.includes(params.get("kind")) ? params.get("kind") : undefined,
    workflowId: params.get("workflow") || undefined,
    environment: ENVIRONMENTS.includes(params.get("environment")) ? params.get("environment") : undefined,
  };
  const cursor = params.get("cursor") || undefined;
  const list = h("div", { id: "audit-list", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading the audit log…"));
  replace(main,
    h("h1", {}, "Audit"),
    h("p", { class: "muted" }, "Who paused, resumed, cancelled, redrove or reran what, and why (the last 90 days)."),
    filterForm(params, ctx), list);
  document.title = "Audit · relayflow";

  function pageLink(label, target, rel) {
    const query = new URLSearchParams(params);
    query.delete("cursor");
    if (target) query.set("cursor", target);
    return h("a", { class: "button", rel, href: "#/audit" + (query.size ? "?" + query.toString() : "") }, label);
  }

  function show(page) {
    const entries = page.entries || [];
    if (!entries.length) {
      const filtered = Object.values(filters).some((v) => v !== undefined);
      replace(list, h("div", { class: "notice", id: "audit-empty" },
        h("p", {}, h("strong", {}, filtered ? "No action matches these filters." : "No action recorded yet.")),
        filtered
          ? h("p", {}, h("a", { href: "#/audit" }, "Clear the filters"), ".")
          : h("p", {}, "Pausing, resuming, cancelling, redriving or rerunning a run records who did it here.")));
      return;
    }
    replace(list, auditTable(entries),
      h("nav", { class: "pager", "aria-label": "Pages" },
        cursor ? pageLink("Newest", undefined, "first") : null,
        page.nextCursor ? pageLink("Older →", page.nextCursor, "next")
          : h("span", { class: "muted", id: "audit-last-page" }, "This is the last page.")));
  }

  function load() {
    api("api/audit", { signal: controller.signal, query: { ...filters, cursor, limit: PAGE_SIZE } })
      .then(show)
      .catch((error) => {
        if (error.name === "AbortError") return;
        if (error instanceof ApiError && error.status === 400 && cursor) {
          replace(list, h("div", { class: "notice error", id: "audit-bad-cursor" }, h("p", {}, error.message),
            h("p", {}, h("a", { href: "#/audit" }, "Start again from the newest actions"))));
          return;
        }
        replace(list, ctx.errorState(error, load));
      });
  }

  load();
  return () => controller.abort();
}
