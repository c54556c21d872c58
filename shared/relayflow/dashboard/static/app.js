// The dashboard's router: "#/runs", "#/runs/<id>", "#/start", "#/manifests", "#/schedules", "#/audit",
// "#/bulk", "#/bulk/<jobId>", "#/workflows", "#/workflows/<id>" (hash routes, so
// every page is the same document and deep links work behind any gateway).

import { ApiError, takeTokenFromFragment, token } from "./api.js";
import { renderAudit } from "./audit.js";
import { renderBulkJob, renderBulkJobs } from "./bulk.js";
import { h, replace } from "./dom.js";
import { refreshRelativeTimes } from "./format.js";
import { renderManifests } from "./manifests.js";
import { renderRun } from "./run.js";
import { renderRuns } from "./runs.js";
import { renderSchedules } from "./schedules.js";
import { renderStart } from "./start.js";
import { renderWorkflow, renderWorkflows } from "./workflow.js";

const main = document.getElementById("main");
let cleanup = null;

export function parseRoute(hash = location.hash) {
  const raw = hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || "runs", rest: parts.slice(1), params: new URLSearchParams(query) };
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// What to do next, for every error a page can meet.
export function errorState(error, retry) {
  if (error instanceof ApiError && error.status === 401) return signIn("That token was not accepted.");
  if (error instanceof ApiError && error.status === 403) {
    return h("div", { class: "notice error", role: "alert" },
      h("p", {}, h("strong", {}, "This token may not do that. "), error.message),
      h("p", {}, "Sign in with a token that has the scope it names (runs:read to look, runs:write to act on a run, runs:admin for bulk actions and workflow pauses)."),
      h("button", { type: "button", onclick: signOut }, "Use another token"));
  }
  const hint = error instanceof ApiError && error.status === 0
    ? "Check that `relayflow dev` (or the deployment) is running, then try again."
    : "Try again; if it keeps failing, the API's answer above says why.";
  return h("div", { class: "notice error", role: "alert" },
    h("p", {}, h("strong", {}, "Something went wrong: "), error.message || String(error)),
    h("p", {}, hint),
    retry ? h("button", { type: "button", onclick: retry }, "Try again") : null);
}

function signOut() {
  token.clear();
  route();
}

function signIn(problem) {
  const input = h("input", { type: "password", id: "token-input", autocomplete: "off", required: true, size: 40 });
  const form = h("form", {
    class: "panel", onsubmit: (event) => {
      event.preventDefault();
      token.set(input.value.trim());
      route();
    },
  },
  h("h1", {}, "Sign in"),
  problem ? h("p", { class: "field-error", role: "alert" }, problem) : null,
  h("p", {}, "Paste an API token. ", h("code", {}, "relayflow dev"),
    " prints a dashboard link that signs you in; a deployment's tokens are the API's bearer tokens."),
  h("label", { for: "token-input" }, "Token", input),
  h("p", {}, h("button", { type: "submit", class: "primary" }, "Sign in")),
  h("p", { class: "muted" }, "The token stays in this tab (session storage) and is sent only as an Authorization header."));
  setTimeout(() => input.focus(), 0);
  return form;
}

export function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  const { page, rest, params } = parseRoute();
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.getElementById("sign-out").hidden = !token.get();
  if (!token.get()) {
    document.title = "Sign in · relayflow";
    replace(main, signIn());
    return;
  }
  const ctx = { navigate, errorState };
  if (page === "runs" && rest.length) cleanup = renderRun(main, rest.join("/"), ctx);
  else if (page === "runs") cleanup = renderRuns(main, params, ctx);
  else if (page === "start") cleanup = renderStart(main, params, ctx);
  else if (page === "manifests") cleanup = renderManifests(main, params, ctx);
  else if (page === "schedules") cleanup = renderSchedules(main, params, ctx);
  else if (page === "audit") cleanup = renderAudit(main, params, ctx);
  else if (page === "bulk" && rest.length) cleanup = renderBulkJob(main, rest.join("/"), ctx);
  else if (page === "bulk") cleanup = renderBulkJobs(main, params, ctx);
  else if (page === "workflows" && rest.length) cleanup = renderWorkflow(main, rest.join("/"), params, ctx);
  else if (page === "workflows") cleanup = renderWorkflows(main, params, ctx);
  else {
    replace(main, h("div", { class: "notice" }, h("p", {}, `There is no page “${page}”.`),
      h("p", {}, h("a", { href: "#/runs" }, "Go to the runs"))));
  }
}

takeTokenFromFragment();
document.getElementById("sign-out").addEventListener("click", signOut);
window.addEventListener("hashchange", () => {
  if (takeTokenFromFragment()) { route(); return; }
  route();
  main.focus({ preventScroll: true });
});
setInterval(() => refreshRelativeTimes(main), 15000);
route();
