// The code a run is on: the "Version" line of the run page (build, function, versioning and
// why the run waits for its version), the version badge of the runs list, and whether the
// "Upgrade to current version" action applies.

import { h } from "./dom.js";
import { formatTime, timeCell } from "./format.js";

// Whether the run names a build its next invocation must reach: a pinned run that some code
// answered, or one waiting for its version.
export function pinned(run) {
  return Boolean(run.versionWait) || (run.versioning !== "upgrade" && Boolean(run.codeVersion));
}

export function versionFact(run) {
  const code = run.codeVersion;
  const parts = [code
    ? h("code", { id: "run-build", title: "the build of the workflow code" }, code.build)
    : h("span", { class: "muted" }, "no code answered yet")];
  if (code && code.function) parts.push(" on ", h("code", { id: "run-function" }, code.function));
  if (run.versioning) {
    parts.push(" · ", h("span", { id: "run-versioning" }, run.versioning === "pinned"
      ? "pinned (keeps this code)" : "upgrade (moves to the current code)"));
  }
  parts.push(" · workflow version ", h("code", {}, run.workflowVersion || "v1"));
  const wait = run.versionWait;
  const waiting = wait ? h("div", { class: "notice warning", id: "run-version-wait", role: "status" },
    h("p", {}, h("strong", {}, "Waiting for its version"), " since ", timeCell(wait.since),
      ` (${formatTime(wait.since)}), ${wait.attempts} tr${wait.attempts === 1 ? "y" : "ies"} so far.`),
    h("p", {}, wait.reason),
    h("p", { class: "muted" }, "Deploy that build again, or upgrade the run to the current version below.")) : null;
  return h("div", { id: "run-version" }, h("span", {}, ...parts), waiting);
}

// The runs list's cell: the build (with the function in its title), marked while the run
// waits for it.
export function versionBadge(run) {
  const code = run.codeVersion;
  if (!code) return h("span", { class: "muted" }, "—");
  const title = code.function ? `${code.build} on ${code.function}` : code.build;
  return h("span", { class: "mono version" + (run.versionWait ? " version-wait" : ""), title },
    code.build, run.versionWait ? " (waiting)" : "");
}
