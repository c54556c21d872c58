// Times in the viewer's time zone, relative times and human durations.

const absolute = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "short", day: "numeric",
  hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
});
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

export function formatTime(ms) {
  if (ms === null || ms === undefined) return "—";
  return absolute.format(new Date(ms));
}

export function formatRelative(ms, now = Date.now()) {
  if (ms === null || ms === undefined) return "";
  const seconds = Math.round((ms - now) / 1000);
  const steps = [[60, "second"], [60, "minute"], [24, "hour"], [30, "day"], [12, "month"]];
  let value = seconds;
  for (const [size, unit] of steps) {
    if (Math.abs(value) < size) return relative.format(value, unit);
    value = Math.round(value / size);
  }
  return relative.format(value, "year");
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const parts = [];
  let rest = Math.round(s);
  for (const [size, unit] of [[86400, "d"], [3600, "h"], [60, "min"]]) {
    if (rest >= size) { parts.push(`${Math.floor(rest / size)} ${unit}`); rest %= size; }
  }
  if (rest && parts.length < 2) parts.push(`${rest} s`);
  return parts.slice(0, 2).join(" ");
}

export function timeCell(ms) {
  const el = document.createElement("time");
  if (ms === null || ms === undefined) { el.textContent = "—"; return el; }
  el.dateTime = new Date(ms).toISOString();
  el.title = formatTime(ms);
  el.dataset.at = String(ms);
  el.textContent = formatRelative(ms);
  return el;
}

// Keep relative times fresh without re-rendering the page.
export function refreshRelativeTimes(root = document) {
  const now = Date.now();
  for (const el of root.querySelectorAll("time[data-at]")) {
    el.textContent = formatRelative(Number(el.dataset.at), now);
  }
}
