// Recurring schedules per environment: what each one fires and when next (in the viewer's time
// zone), its overlap policy and state, with Pause, Resume and Trigger now.

import { api, ApiError } from "./api.js";
import { h, replace, toast } from "./dom.js";
import { formatTime, formatRelative, timeCell } from "./format.js";
import { statusBadge } from "./runs.js";

const ENVIRONMENTS = ["development", "preview", "production"];
const ENDED = new Set(["completed", "failed", "cancelled", "compensated", "compensation_failed"]);
// How soon the page looks again while a schedule's last run has not ended.
const FOLLOW_MS = 2000;
const OVERLAP = {
  skip: "skip: a firing while the previous run goes on starts nothing",
  queue: "queue: one firing waits for the previous run to end",
  allow: "allow: every firing starts a run",
};

function schedulePath(id, action) {
  return `api/schedules/${encodeURIComponent(id)}/${action}`;
}

// "cron 0 9 * * MON-FRI", "every 15m" or "at <the time in the viewer's zone>".
export function describeTiming(schedule) {
  const declared = schedule.declaration || {};
  if (schedule.kind === "at") return `at ${formatTime(Date.parse(declared.at))}`;
  return `${schedule.kind} ${declared[schedule.kind] ?? "—"}`;
}

export function scheduleState(schedule) {
  const declared = schedule.declaration || {};
  if (declared.enabled === false) return { key: "disabled", text: "disabled in the manifest" };
  if (schedule.paused) return { key: "paused", text: "paused" };
  if (schedule.kind === "at" && schedule.fired) return { key: "fired", text: "fired (once)" };
  return { key: "active", text: "active" };
}

function nextFires(schedule) {
  const times = schedule.nextFireTimes || [];
  if (!times.length) return h("p", { class: "muted" }, "No upcoming fire time.");
  return h("ol", { class: "next-fires" }, times.map((iso) => {
    const ms = Date.parse(iso);
    return h("li", {}, h("span", { class: "fire-at" }, formatTime(ms)), " · ", timeCell(ms));
  }));
}

// The run the latest firing started, under its status now, and how it was started.
function lastRunFacts(run) {
  if (!run) return [h("dt", {}, "Last run"), h("dd", { class: "last-run" }, "none yet")];
  const how = run.manual
    ? h("span", { class: "last-run-how" }, "triggered by hand (Trigger now)")
    : h("span", { class: "last-run-how" }, "scheduled for ", run.scheduledTime ? timeCell(Date.parse(run.scheduledTime)) : "—");
  return [h("dt", {}, "Last run"), h("dd", { class: "last-run" },
    h("a", { class: "mono", href: `#/runs/${encodeURIComponent(run.runId)}` }, run.runId), " ",
    run.status ? statusBadge(run.status) : h("span", { class: "muted" }, "starting"), h("br", {}),
    how, run.startedAt ? [", started ", timeCell(run.startedAt)] : null)];
}

function scheduleCard(schedule, note, act) {
  const state = scheduleState(schedule);
  const title = schedule.name || schedule.id;
  const busy = (button, action) => (event) => {
    event.currentTarget.disabled = true;
    act(schedule, action, button);
  };
  const pause = h("button", {
    type: "button", dataset: { action: "pause" }, onclick: busy("resume", "pause"),
    "aria-label": `Pause ${title}`,
  }, "Pause");
  const resume = h("button", {
    type: "button", class: "primary", dataset: { action: "resume" }, onclick: busy("pause", "resume"),
    "aria-label": `Resume ${title}`,
  }, "Resume");
  const trigger = h("button", {
    type: "button", dataset: { action: "trigger" }, onclick: busy("trigger", "trigger"),
    "aria-label": `Trigger ${title} now`,
  }, "Trigger now");
  return h("article", { class: "panel schedule", dataset: { scheduleId: schedule.id } },
    h("div", { class: "row spread" },
      h("h2", {}, h("span", { class: "mono" }, title)),
      h("span", { class: `badge schedule-state st-${state.key}` }, state.text)),
    h("dl", { class: "facts" },
      h("dt", {}, "Id"), h("dd", { class: "mono" }, schedule.id),
      h("dt", {}, "Workflow"), h("dd", {}, h("a", { class: "mono", href: `#/runs?workflow=${encodeURIComponent(schedule.workflowId)}` }, schedule.workflowId)),
      h("dt", {}, "Timing"), h("dd", { class: "mono schedule-timing" }, describeTiming(schedule)),
      h("dt", {}, "Time zone"), h("dd", {}, schedule.timezone),
      h("dt", {}, "Overlap"), h("dd", {}, OVERLAP[schedule.overlap] || schedule.overlap),
      h("dt", {}, "Last scheduled firing"), h("dd", { class: "last-fired" }, schedule.lastScheduledTime ? timeCell(Date.parse(schedule.lastScheduledTime)) : "never"),
      lastRunFacts(schedule.lastRun),
      schedule.queuedTime ? [h("dt", {}, "Queued"), h("dd", {}, "the firing for ", timeCell(Date.parse(schedule.queuedTime)))] : null),
    h("h3", {}, "Next fire times ", h("span", { class: "muted" }, "(your time zone)")),
    schedule.paused ? h("p", { class: "muted" }, "Paused: it does not fire until resumed (Trigger now still starts a run).") : nextFires(schedule),
    h("div", { class: "row" }, schedule.paused ? resume : pause, trigger),
    note ? h("p", { class: note.error ? "field-error" : "ok-text", role: note.error ? "alert" : "status" }, note.parts) : null);
}

function firingNote(firing) {
  const run = firing.runId
    ? [" ", h("a", { class: "mono", href: `#/runs/${encodeURIComponent(firing.runId)}` }, firing.runId)]
    : [];
  return { error: false, parts: [`Triggered by hand at ${formatTime(Date.parse(firing.scheduledTime))}: ${firing.status}`, ...run] };
}

export function renderSchedules(main, params, ctx) {
  const controller = new AbortController();
  const environment = ENVIRONMENTS.includes(params.get("env")) ? params.get("env") : "development";
  const notes = new Map();
  let follow = 0;
  document.title = `Schedules · ${environment} · relayflow`;
  const envNav = h("nav", { class: "row", "aria-label": "Environments" }, ENVIRONMENTS.map((e) =>
    h("a", { href: `#/schedules?env=${e}`, class: "button", "aria-current": e === environment ? "page" : null }, e)));
  const body = h("div", { id: "schedules-body" }, h("p", { class: "muted" }, "Loading the schedules…"));
  replace(main, h("h1", {}, "Schedules"), envNav, body);

  // The focused button, to focus it again once the cards are drawn anew.
  function focusedButton() {
    const active = document.activeElement;
    const card = active && body.contains(active) ? active.closest("[data-schedule-id]") : null;
    return card && active.dataset.action ? { id: card.dataset.scheduleId, action: active.dataset.action } : null;
  }

  function load(focus) {
    clearTimeout(follow);
    return api("api/schedules", { query: { environment }, signal: controller.signal }).then((found) => {
      const schedules = found.schedules || [];
      focus = focus || focusedButton();
      show(schedules);
      if (focus) body.querySelector(`[data-schedule-id="${CSS.escape(focus.id)}"] [data-action="${focus.action}"]`)?.focus();
      // A last run still going is followed until it ends, so it shows under its real status.
      if (schedules.some((s) => s.lastRun && !ENDED.has(s.lastRun.status))) follow = setTimeout(() => load(), FOLLOW_MS);
    }).catch((error) => {
      if (error.name === "AbortError") return;
      if (error instanceof ApiError && error.status === 404 && error.code === "not_found") {
        replace(body, h("div", { class: "notice", id: "schedules-unhosted" },
          h("p", {}, h("strong", {}, "This deployment hosts no schedules. ")),
          h("p", {}, "Set ", h("code", {}, "RELAYFLOW_RECURRING_SCHEDULE_GROUP"),
            " (the CDK stack does) so manifests' schedules are put on EventBridge Scheduler.")));
        return;
      }
      replace(body, ctx.errorState(error, () => load()));
    });
  }

  function act(schedule, action, focusAfter) {
    api(schedulePath(schedule.id, action), { method: "POST", query: { environment }, signal: controller.signal })
      .then((answer) => {
        if (action === "trigger") notes.set(schedule.id, firingNote(answer));
        else notes.delete(schedule.id);
        toast(action === "trigger" ? `Triggered: ${answer.status}` : `${schedule.name || schedule.id} ${action === "pause" ? "paused" : "resumed"}`);
        return load({ id: schedule.id, action: focusAfter });
      })
      .catch((error) => {
        if (error.name === "AbortError") return;
        notes.set(schedule.id, { error: true, parts: [`Could not ${action === "trigger" ? "trigger" : action} it: ${error.message}`] });
        return load({ id: schedule.id, action });
      });
  }

  function show(schedules) {
    if (!schedules.length) {
      replace(body, h("div", { class: "notice", id: "schedules-empty" },
        h("p", {}, h("strong", {}, `No schedules in ${environment}.`)),
        h("p", {}, "Declare one with ", h("code", {}, '@workflow(id=..., schedule=Schedule.cron("0 9 * * MON-FRI"))'),
          " (or ", h("code", {}, "Schedule.every"), ", ", h("code", {}, "Schedule.at"),
          ") and register the manifest: ", h("code", {}, `relayflow manifest push --env ${environment}`),
          "; ", h("code", {}, "relayflow dev"), " registers its app's at start-up.")));
      return;
    }
    const now = Date.now();
    const upcoming = schedules.filter((s) => !s.paused && s.nextFireTimes?.length)
      .map((s) => Date.parse(s.nextFireTimes[0])).sort((a, b) => a - b)[0];
    replace(body,
      h("p", { class: "muted", id: "schedules-summary" },
        `${schedules.length} schedule(s), ${schedules.filter((s) => s.paused).length} paused`,
        upcoming ? `; the next firing is ${formatRelative(upcoming, now)}.` : "."),
      h("div", { id: "schedules-list", class: "grid2" },
        schedules.map((s) => scheduleCard(s, notes.get(s.id), act))));
  }

  load();
  return () => { clearTimeout(follow); controller.abort(); };
}
