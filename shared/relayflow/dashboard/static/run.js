// One run: its facts and values, the timeline as a Gantt chart, actions on its pending waits,
// the operator actions (pause, resume, redrive, upgrade, cancel, rerun from a step) and the
// journal,
// live until the run ends.

import { api, ApiError, runPath } from "./api.js";
import { costFacts } from "./costs.js";
import { h, replace, toast } from "./dom.js";
import { formatDuration, formatTime, timeCell } from "./format.js";
import { ganttChart, legend, timelineTable, waitKind } from "./gantt.js";
import { errorPanel, errorSummary, failedAttempts } from "./failures.js";
import { jsonView } from "./json.js";
import { actionsPanel, openRerunDialog, operationFacts, rerunnable } from "./run_actions.js";
import { statusBadge } from "./runs.js";
import { stepDetailPanel } from "./step_detail.js";
import { pinned, versionFact } from "./versions.js";

const TERMINAL = new Set(["completed", "failed", "cancelled", "compensated", "compensation_failed"]);
const STREAM_WAIT_MS = 15000;

function runLink(id) {
  return h("a", { href: "#/runs/" + encodeURIComponent(id), class: "mono" }, id);
}

// The run's trace id, linked to the trace viewer when the deployment names one.
function traceFact(run) {
  if (!run.traceId) return "—";
  if (!run.traceUrl) return h("span", { class: "mono", dataset: { trace: run.traceId } }, run.traceId);
  return h("a", { href: run.traceUrl, target: "_blank", rel: "noopener", class: "mono", dataset: { trace: run.traceId } }, run.traceId);
}

function parseJson(text) {
  if (!text.trim()) return { ok: true, value: null };
  try { return { ok: true, value: JSON.parse(text) }; } catch (error) { return { ok: false, message: error.message }; }
}

function facts(run) {
  const row = (label, value) => [h("dt", {}, label), h("dd", {}, value)];
  const trigger = run.triggeredBy && Object.keys(run.triggeredBy).length
    ? Object.entries(run.triggeredBy).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ")
    : "—";
  return h("dl", { class: "facts" },
    row("Workflow", h("a", { href: "#/runs?workflow=" + encodeURIComponent(run.workflowId) }, run.workflowId)),
    row("Version", versionFact(run)),
    row("Environment", run.environment),
    row("Started", [timeCell(run.startedAt), ` (${formatTime(run.startedAt)})`]),
    row("Ended", run.completedAt ? [timeCell(run.completedAt), ` (${formatTime(run.completedAt)})`] : "not yet"),
    row("Duration", run.durationMs !== null && run.durationMs !== undefined ? formatDuration(run.durationMs) : formatDuration(Date.now() - run.startedAt) + " so far"),
    row("Tags", (run.tags || []).length ? run.tags.map((t) => h("a", { class: "tag", href: "#/runs?tag=" + encodeURIComponent(t) }, t)) : "none"),
    row("Idempotency key", run.idempotencyKey || "—"),
    row("Triggered by", trigger),
    row("Parent", run.parentRunId ? runLink(run.parentRunId) : "none"),
    row("Children", (run.children || []).length ? h("ul", {}, run.children.map((c) => h("li", {}, runLink(c)))) : "none"),
    row("Trace", traceFact(run)),
    operationFacts(run),
    costFacts(run));
}

function section(title, ...content) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...content);
}

function waitActions(run, wait, refresh) {
  const kind = waitKind({ id: wait.id, kind: wait.kind });
  const status = h("p", { class: "field-error", role: "alert" });
  const payload = h("textarea", { id: `payload-${wait.id}`, spellcheck: "false", placeholder: "{ }", rows: 4 });
  const send = async (path, body, done) => {
    status.textContent = "";
    try {
      await api(runPath(run.id) + path, { method: "POST", body });
      toast(done);
      refresh();
    } catch (error) {
      status.textContent = `${error.message}${error instanceof ApiError ? ` (${error.code})` : ""}`;
    }
  };
  const withPayload = (fn) => () => {
    const parsed = parseJson(payload.value);
    if (!parsed.ok) { status.textContent = `The payload is not valid JSON: ${parsed.message}`; payload.focus(); return; }
    fn(parsed.value);
  };
  const heading = h("h3", {}, `${kind} · `, h("span", { class: "mono" }, wait.id));
  const since = wait.registeredAt ? h("p", { class: "muted" }, "Waiting since ", timeCell(wait.registeredAt)) : null;
  const payloadField = h("label", { for: payload.id }, "Payload (JSON)", payload);
  if (kind === "event") {
    const type = h("input", { id: `type-${wait.id}`, value: wait.eventType || "", size: 28 });
    return h("div", { class: "action", dataset: { wait: wait.id } }, heading, since,
      h("label", { for: type.id }, "Event type", type), payloadField,
      h("div", { class: "row" }, h("button", { type: "button", class: "primary", onclick: withPayload((value) =>
        send("/events", { eventType: type.value.trim(), payload: value }, `Event ${type.value} sent`)) }, "Send event")), status);
  }
  if (kind === "signal") {
    const name = h("input", { id: `name-${wait.id}`, value: wait.signalName || "", size: 28 });
    return h("div", { class: "action", dataset: { wait: wait.id } }, heading, since,
      h("label", { for: name.id }, "Signal name", name), payloadField,
      h("div", { class: "row" }, h("button", { type: "button", class: "primary", onclick: withPayload((value) =>
        send("/signals", { name: name.value.trim(), payload: value }, `Signal ${name.value} sent`)) }, "Send signal")), status);
  }
  if (kind === "token") {
    const token = encodeURIComponent(wait.tokenId || wait.id.replace(/^token:/, ""));
    const code = h("input", { id: `code-${wait.id}`, placeholder: "REJECTED", size: 14 });
    const message = h("input", { id: `message-${wait.id}`, placeholder: "why it failed", size: 28 });
    return h("div", { class: "action", dataset: { wait: wait.id } }, heading, since, payloadField,
      h("div", { class: "row" },
        h("button", { type: "button", class: "primary", onclick: withPayload((value) =>
          send(`/tokens/${token}`, { payload: value }, "Token completed")) }, "Complete token"),
        h("button", { type: "button", onclick: () => send(`/tokens/${token}/heartbeat`, undefined, "Heartbeat sent") }, "Heartbeat")),
      h("div", { class: "row" },
        h("label", { for: code.id }, "Error code (optional)", code),
        h("label", { for: message.id }, "Error message", message),
        h("button", { type: "button", class: "danger", onclick: () => {
          if (!message.value.trim()) { status.textContent = "Say why the token fails (error message)."; message.focus(); return; }
          const error = { message: message.value.trim() };
          if (code.value.trim()) error.code = code.value.trim();
          send(`/tokens/${token}/fail`, { error }, "Token failed");
        } }, "Fail token")), status);
  }
  const child = kind === "child" ? (run.children || []).map((c) => h("p", {}, "Child run: ", runLink(c))) : null;
  return h("div", { class: "action", dataset: { wait: wait.id } }, heading, since,
    h("p", { class: "muted" }, kind === "child" ? "Resolves when the child run ends." : "Resolves by itself when its time comes."), child);
}

function journalLine(event) {
  const by = event.data && event.data.by ? ` by ${event.data.by}` : "";
  const what = event.type === "status" ? `run ${event.status}`
    : event.type === "stream_chunk" ? `stream ${event.id} chunk ${event.attempt}`
    : event.type === "action" ? `${event.kind}${by}${event.data && event.data.reason ? `: ${event.data.reason}` : ""}`
    : `${event.type === "wait" ? (waitKind(event)) + " wait" : "step"} ${event.id}${event.attempt && event.type === "step" ? ` #${event.attempt}` : ""}: ${event.status}`;
  const error = event.error ? ` — ${errorSummary(event.error)}` : "";
  return h("li", { dataset: { seq: event.seq } }, h("span", { class: "muted mono" }, `${event.seq}. `),
    timeCell(event.at), " ", what, error);
}

// ``onSelect(entry)``: opens a step attempt's detail from its bar or its row.
export function renderTimeline(container, entries, run, onSelect = null) {
  performance.mark("timeline-render-start");
  const width = Math.max(320, container.clientWidth || 900);
  const end = run.completedAt || Date.now();
  // "Rerun from here" on each top-level step of an ended run.
  const onRerun = entries.some((e) => rerunnable(run, e)) ? (entry) => (rerunnable(run, entry) ? () => openRerunDialog(run, entry.id) : null) : null;
  const table = h("details", { ontoggle: (event) => {
    if (event.target.open && !event.target.dataset.built) { event.target.dataset.built = "1"; event.target.append(timelineTable(entries, { onRerun, onSelect })); }
  } }, h("summary", {}, "The same timeline as a table"));
  replace(container, entries.length
    ? [legend(), h("div", { class: "gantt-wrap", tabindex: "0", "aria-label": "Timeline chart (scrolls)" },
      ganttChart(entries, { start: run.startedAt, end, finished: TERMINAL.has(run.status), width, onRerun, onSelect })), table]
    : h("p", { class: "muted" }, "No steps or waits yet."));
  performance.mark("timeline-render-end");
  performance.measure("timeline-render", "timeline-render-start", "timeline-render-end");
}

export function renderRun(main, runId, ctx) {
  const controller = new AbortController();
  let stopped = false;
  let pendingKey = null;
  let shownStatus = null;
  let shownActions = null;
  // The journal's position, kept across follows: an action can bring an ended run back.
  let after = 0;
  let following = false;
  // Reads may overlap (an action's and the stream's): a read is shown only when no read
  // begun after it has been shown already.
  let reads = 0;
  let shownRead = 0;
  const header = h("div", {});
  const factsBox = h("div", {});
  const values = h("div", { class: "grid2" });
  const waitsBox = h("div", { id: "pending-waits" });
  const actionsBox = h("div", {});
  const timelineBox = h("div", { id: "timeline" });
  const journal = h("ul", { id: "journal-list" });
  const liveLabel = h("span", { class: "live", id: "journal-live" }, "live");
  const compensations = h("div", {});
  const failuresBox = h("div", {});
  const stepDetail = stepDetailPanel(runId, controller.signal);
  document.title = `${runId} · relayflow`;
  replace(main, h("p", { class: "muted" }, "Loading the run…"));

  async function refresh() {
    if (stopped) return;
    const read = ++reads;
    try {
      // The timeline is read after the run, so that it holds at least what the run's status
      // says: a run read as ended is never drawn with the timeline of before its end.
      const run = await api(runPath(runId), { signal: controller.signal });
      const timeline = await api(runPath(runId) + "/timeline", { signal: controller.signal });
      if (read < shownRead) return;
      shownRead = read;
      if (!header.isConnected) layout();
      show(run, timeline.entries || []);
    } catch (error) {
      if (error.name === "AbortError") return;
      if (error instanceof ApiError && error.status === 404) {
        replace(main, h("div", { class: "notice", role: "alert" }, h("h1", {}, "No such run"),
          h("p", {}, "There is no run with the id ", h("code", {}, runId), ". Check the id, or look for it in the ",
            h("a", { href: "#/runs" }, "runs list"), ".")));
        stopped = true;
        return;
      }
      replace(main, ctx.errorState(error, refresh));
    }
  }

  function layout() {
    replace(main, header, section("Run", factsBox), values, compensations, waitsBox, actionsBox,
      section("Timeline", timelineBox), stepDetail.panel, failuresBox,
      section("Journal", h("div", { class: "row spread" }, h("span", { class: "muted" }, "Every step attempt, wait, operator action and stream chunk, in order."), liveLabel),
        h("div", { class: "journal", tabindex: "0", "aria-label": "Journal" }, journal)));
  }

  function show(run, entries) {
    document.title = `${run.status} · ${run.id} · relayflow`;
    replace(header, h("p", {}, h("a", { href: "#/runs" }, "← Runs")),
      h("div", { class: "row" }, h("h1", {}, run.id), h("span", { id: "run-status" }, statusBadge(run.status))),
      run.statusDetail ? h("p", { id: "run-status-detail", class: "muted" }, run.statusDetail) : null);
    replace(factsBox, facts(run));
    replace(values,
      section("Input", jsonView(run.input)),
      section(run.error ? "Error" : "Output", run.error ? errorPanel(run.error) : (TERMINAL.has(run.status) ? jsonView(run.output) : h("p", { class: "muted" }, "Not finished yet."))),
      Object.keys(run.metadata || {}).length ? section("Metadata", jsonView(run.metadata)) : null);
    replace(compensations, (run.compensations || []).length ? section("Compensations", jsonView(run.compensations)) : null);
    const waits = TERMINAL.has(run.status) ? [] : run.pendingWaitpoints || [];
    const key = JSON.stringify(waits.map((w) => w.id)) + run.status;
    if (key !== pendingKey) {
      pendingKey = key;
      replace(waitsBox, waits.length ? section("Pending waits", waits.map((w) => waitActions(run, w, refresh))) : null);
    }
    const actionsKey = `${run.status} ${pinned(run)} ${Boolean(run.versionWait)}`;
    shownStatus = run.status;
    if (shownActions !== actionsKey) {
      shownActions = actionsKey;
      replace(actionsBox, actionsPanel(run, acted));
    }
    renderTimeline(timelineBox, entries, run, stepDetail.show);
    const failed = failedAttempts(entries);
    replace(failuresBox, failed ? section("Failed attempts", failed) : null);
  }

  // After an operator action: show the run at once, and follow it again if it had ended.
  function acted() {
    refresh();
    if (!following && !stopped) follow();
  }

  async function follow() {
    following = true;
    while (!stopped) {
      try {
        const answer = await api(runPath(runId) + "/stream", {
          // The status shown is sent so that a change the page has not drawn is answered at once.
          signal: controller.signal,
          query: { after, waitMs: after === 0 ? 0 : STREAM_WAIT_MS, status: shownStatus },
        });
        const fresh = answer.events || [];
        if (fresh.length) {
          for (const event of fresh) journal.append(journalLine(event));
          const box = journal.parentElement;
          if (box) box.scrollTop = box.scrollHeight;
        }
        // A run that ended since it was shown is read once more (its timeline may have been
        // read before its end); one shown ended already is final and not drawn again.
        const endedSince = answer.done && !TERMINAL.has(shownStatus);
        if ((fresh.length && after > 0) || answer.status !== shownStatus || endedSince) await refresh();
        after = answer.next;
        if (answer.done) { liveLabel.textContent = "finished"; liveLabel.classList.remove("live"); following = false; return; }
        liveLabel.textContent = "live";
        liveLabel.classList.add("live");
      } catch (error) {
        if (error.name === "AbortError" || stopped) { following = false; return; }
        liveLabel.textContent = "reconnecting…";
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    }
  }

  refresh().then(() => { if (!stopped) follow(); });
  return () => { stopped = true; controller.abort(); };
}
