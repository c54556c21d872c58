// One step attempt in detail, opened from its bar in the chart or its row in the timeline
// table: what it returned, or what it was given and how it failed (type, message,
// traceback), its values as pretty-printed JSON. Values are read on demand (the timeline with values), and a value the
// timeline caps is read whole from the run's history.

import { api, ApiError, runPath } from "./api.js";
import { h, replace } from "./dom.js";
import { errorPanel } from "./failures.js";
import { formatDuration, formatTime } from "./format.js";

// Characters of pretty-printed JSON shown before "Show all".
export const SHOWN_CHARS = 2000;
const PAGE_LIMIT = 200;

function same(a, b) {
  return a.type === b.type && a.id === b.id && (a.attempt ?? 1) === (b.attempt ?? 1) && (a.redrive ?? null) === (b.redrive ?? null);
}

// The entry again, with its value (``value``, ``valueTruncated``...), from the timeline pages.
async function withValue(runId, entry, signal) {
  let cursor;
  do {
    const page = await api(runPath(runId) + "/timeline", { signal, query: { values: true, limit: PAGE_LIMIT, cursor } });
    const found = (page.entries || []).find((e) => same(e, entry));
    if (found) return found;
    cursor = page.nextCursor;
  } while (cursor);
  return entry;
}

// The step's whole result from the run's history (the timeline caps values it gives).
async function wholeOutput(runId, stepId, signal) {
  const history = await api(runPath(runId) + "/history", { signal });
  const step = ((history.journal || {}).stepResults || {})[stepId];
  return step ? step.output : undefined;
}

// Pretty-printed JSON in a <pre>, cut at SHOWN_CHARS with a button that shows it all.
export function prettyValue(value, label) {
  const text = JSON.stringify(value, null, 2) ?? "undefined";
  if (text.length <= SHOWN_CHARS) return h("pre", { class: "step-value", "aria-label": label }, text);
  const pre = h("pre", { class: "step-value", "aria-label": label }, text.slice(0, SHOWN_CHARS) + "\n…");
  const more = h("button", { type: "button", class: "link show-all", onclick: () => {
    pre.textContent = text;
    more.remove();
  } }, `Show all (${text.length.toLocaleString()} characters)`);
  return h("div", {}, pre, more);
}

function outputSection(runId, entry, signal) {
  const box = h("div", { class: "step-output" });
  if (entry.valueUnavailable) {
    replace(box, h("p", { class: "muted" }, `The payload store no longer gives this value (${entry.valueUnavailable}).`));
  } else if (entry.valueTruncated) {
    const load = h("button", { type: "button", class: "show-all", onclick: async () => {
      load.disabled = true;
      try {
        replace(box, prettyValue(await wholeOutput(runId, entry.id, signal), "Output"));
      } catch (error) {
        if (error.name !== "AbortError") replace(box, h("p", { class: "field-error", role: "alert" }, error.message));
      }
    } }, `Show all (${(entry.valueSize || 0).toLocaleString()} bytes)`);
    replace(box, h("p", { class: "muted" }, "Too large to show here."), load);
  } else {
    replace(box, prettyValue(entry.value ?? null, "Output"));
  }
  return box;
}

const OUTCOMES = { ok: "returned", err: "failed", retrying: "failed, to be retried", started: "running" };

function body(runId, entry, signal) {
  const span = entry.endedAt != null ? formatDuration(entry.endedAt - entry.startedAt) : "still running";
  const outcome = OUTCOMES[entry.outcome] || entry.outcome;
  const facts = h("p", { class: "muted step-facts" }, `Attempt ${entry.attempt ?? 1}: ${outcome}, ${span}, from ${formatTime(entry.startedAt)}`,
    entry.redrive != null ? ` (taken out by redrive ${entry.redrive})` : "");
  if (entry.error) {
    const input = entry.input != null ? [h("h3", {}, "Input"), prettyValue(entry.input, "Input")] : [];
    return [facts, ...input, h("h3", {}, "Error"), errorPanel(entry.error)];
  }
  if (entry.outcome === "ok") return [facts, h("h3", {}, "Output"), outputSection(runId, entry, signal)];
  return [facts, h("p", { class: "muted" }, "No result yet.")];
}

// The panel below the timeline; ``show(entry)`` fills it with that step attempt.
export function stepDetailPanel(runId, signal) {
  const content = h("div", {});
  const heading = h("h2", { id: "step-detail-title", tabindex: "-1" });
  const close = h("button", { type: "button", "aria-label": "Close the step's detail", onclick: () => { panel.hidden = true; } }, "Close");
  const panel = h("section", { class: "panel", id: "step-detail", hidden: true, "aria-labelledby": "step-detail-title" },
    h("div", { class: "row spread" }, heading, close), content);
  let shown = 0;
  async function show(entry) {
    const ticket = ++shown;
    panel.hidden = false;
    heading.textContent = `Step ${entry.id} #${entry.attempt ?? 1}`;
    replace(content, h("p", { class: "muted" }, "Loading its values…"));
    heading.focus();
    try {
      // A returned attempt's output and a failed attempt's arguments come with the values.
      const full = entry.outcome === "ok" || entry.error ? await withValue(runId, entry, signal) : entry;
      if (ticket === shown) replace(content, body(runId, full, signal));
    } catch (error) {
      if (error.name === "AbortError" || ticket !== shown) return;
      replace(content, h("p", { class: "field-error", role: "alert" },
        `Could not read the step's values: ${error.message}${error instanceof ApiError ? ` (${error.code})` : ""}`));
    }
  }
  return { panel, show };
}
