// Failed step attempts: the exception's type and message, and its traceback (the workflow's own
// frames, as the step host recorded them) in a <pre>; text nodes only, never HTML.

import { h } from "./dom.js";
import { jsonView } from "./json.js";

export function errorSummary(error) {
  if (!error) return "";
  const code = error.code && error.code !== "UNKNOWN" ? ` [${error.code}]` : "";
  return error.name ? `${error.name}: ${error.message || ""}${code}` : `${error.code || ""}: ${error.message || ""}`;
}

function traceback(error) {
  return error.stack ? h("pre", { class: "traceback" }, error.stack) : h("p", { class: "muted" }, "No traceback recorded.");
}

// The run's error: type and message, its traceback, then the rest of it as JSON.
export function errorPanel(error) {
  const { stack, ...rest } = error;
  return h("div", { class: "error-panel" },
    h("p", { class: "error-type mono" }, errorSummary(error)),
    stack ? h("pre", { class: "traceback" }, stack) : null,
    jsonView(rest));
}

// One panel per failed step attempt of the timeline (a later successful retry keeps them).
export function failedAttempts(entries) {
  const failed = entries.filter((e) => e.type === "step" && e.error);
  if (!failed.length) return null;
  return h("div", { id: "failed-attempts" }, failed.map((e) =>
    h("details", { class: "attempt-failure", open: failed.length <= 3, dataset: { step: e.id, attempt: e.attempt ?? 1 } },
      h("summary", {}, h("span", { class: "mono" }, `${e.id} #${e.attempt ?? 1}`), " ",
        h("span", { class: "error-type mono" }, errorSummary(e.error))),
      traceback(e.error))));
}
