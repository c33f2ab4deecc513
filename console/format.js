// Formatting: schedules in words, instants in a time zone, durations.

/** Runs that started later than this after their instant are highlighted (docs/console.md). */
export const LATE_THRESHOLD_MS = 5000;

export const viewerZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone;

/** "2026-11-24 09:30:00 CET" in `timeZone` (the viewer's by default). */
export function instant(value, timeZone = undefined) {
  if (!value) return "—";
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  const parts = new Intl.DateTimeFormat("en-CA", {
    timeZone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
    minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  }).formatToParts(date);
  const part = (type) => parts.find((p) => p.type === type)?.value ?? "";
  return `${part("year")}-${part("month")}-${part("day")} ${part("hour")}:${part("minute")}:${part("second")} ${part("timeZoneName")}`;
}

// Bidirectional controls reorder the text after them on screen (a stored "0001 USD" showed as
// "1000 USD"): JSON shows them escaped, which is the same JSON (found by an outside audit).
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** JSON `text` parsed with each number kept as written where a double would change it
 * (12345678901234567891, 1.0): shown and sent back exactly, as JSON.rawJSON (a browser without
 * it rounds them). For payloads only: the API's own numbers are read as numbers. Until
 * 2026-11-30 an edit in the console sent a payload's big integers rounded (an outside audit). */
export function parseExact(text) {
  if (typeof JSON.rawJSON !== "function") return JSON.parse(text);
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && context?.source !== undefined && String(value) !== context.source
      ? JSON.rawJSON(context.source) : value);
}

/** `value` as JSON for the screen (and the form): bidirectional controls escaped. */
export function json(value, space = undefined) {
  const text = JSON.stringify(value, null, space) ?? "";
  return text.replace(BIDI, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A job's target for its page: its headers' values hidden (credentials, often, and pages get
 * shared and screenshotted); the edit form shows them. */
export function shownTarget(target) {
  if (!target?.headers || !Object.keys(target.headers).length) return json(target);
  const hidden = Object.fromEntries(Object.keys(target.headers).map((name) => [name, "••••••"]));
  return json({ ...target, headers: hidden });
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (abs < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value === 0) return "0 seconds"; // not "0 days" (0 is a multiple of a day)
  if (value % 86400 === 0) return plural(value / 86400, "day");
  if (value % 3600 === 0) return plural(value / 3600, "hour");
  if (value % 60 === 0) return plural(value / 60, "minute");
  return plural(value, "second");
}

function plural(n, unit) {
  return n === 1 ? `1 ${unit}` : `${n} ${unit}s`;
}

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const DAY_NAMES = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
  "September", "October", "November", "December"];
const MONTH_NAMES = Object.fromEntries(MONTHS.map((m, i) => [m.slice(0, 3).toLowerCase(), i + 1]));
const MACROS = {
  "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
};

const pad = (n) => String(n).padStart(2, "0");

function listOf(field, name) {
  return field.split(",").map((item) => {
    const [range, step] = item.split("/");
    const [a, b] = range.split("-").map(name);
    let text = range === "*" ? "every" : b !== undefined ? `${a} through ${b}` : a;
    if (step) text = range === "*" ? `every ${step}` : `${text}, every ${step}`;
    return text;
  }).join(", ");
}

/** A five-field cron expression in English (best effort: the API is the judge of validity). */
export function describeCron(expression) {
  const text = MACROS[expression.trim().toLowerCase()] || expression.trim();
  const fields = text.split(/\s+/);
  if (fields.length !== 5) return `cron "${expression}"`;
  const [minute, hour, dom, month, dow] = fields;
  const simple = (f) => /^\d+$/.test(f);
  let when;
  if (simple(minute) && simple(hour)) when = `at ${pad(hour)}:${pad(minute)}`;
  else if (simple(minute) && hour === "*") when = `at minute ${minute} of every hour`;
  else if (minute === "*" && hour === "*") when = "every minute";
  else if (/^\*\/\d+$/.test(minute) && hour === "*") when = `every ${minute.slice(2)} minutes`;
  else if (minute === "*") when = `every minute of hour ${listOf(hour, String)}`;
  else if (hour === "*") when = `at minute ${listOf(minute, String)} of every hour`;
  else when = `at minute ${listOf(minute, String)} of hour ${listOf(hour, String)}`;
  const parts = [when];
  const dayName = (d) => DAYS[(DAY_NAMES[d.toLowerCase()] ?? Number(d)) % 7] ?? d;
  const monthName = (m) => MONTHS[(MONTH_NAMES[m.toLowerCase()] ?? Number(m)) - 1] ?? m;
  // The day extensions (L, 15W, 1#2, 5L) are not put in words: the expression is shown as
  // written (until 2026-12-01 "on 5L", "on day ? of the month").
  if (/[LW#]/i.test(`${dom} ${dow}`.replace(/[a-z]{3}/gi, (name) => (name.toLowerCase() in DAY_NAMES ? "" : name)))) {
    return `${when}, cron "${text}"`;
  }
  // `?` is `*`. With both day fields restricted (neither starts with `*`), a day matches
  // EITHER (docs/schedules.md, Vixie cron): "0 9 13 * 5" is every Friday and every 13th
  // (until 2026-12-01 it read as Friday the 13th; an outside audit). Otherwise both.
  const any = (f) => f === "*" || f === "?";
  const days = [any(dow) ? null : `on ${listOf(dow, dayName)}`,
    any(dom) ? null : `on day ${listOf(dom, String)} of the month`].filter(Boolean);
  const either = !dow.startsWith("*") && !dom.startsWith("*") && days.length === 2;
  if (days.length) parts.push(days.join(either ? " or " : " "));
  if (month !== "*") parts.push(`in ${listOf(month, monthName)}`);
  return parts.join(" ");
}

/** A schedule object (docs/api.md) in words. */
export function describeSchedule(schedule) {
  if (!schedule) return "—";
  const bounds = [];
  if (schedule.start_at) bounds.push(`from ${instant(schedule.start_at)}`);
  if (schedule.end_at) bounds.push(`until ${instant(schedule.end_at)}`);
  const tail = bounds.length ? `, ${bounds.join(" ")}` : "";
  if ("cron" in schedule) {
    return `${describeCron(schedule.cron)} (${schedule.timezone || "UTC"})${tail}`;
  }
  if ("rate_seconds" in schedule) return `every ${seconds(schedule.rate_seconds)}${tail}`;
  if ("at" in schedule) return `once, at ${instant(schedule.at)}`;
  if ("delay_seconds" in schedule) {
    return schedule.delay_seconds === 0 ? "once, at submission" : `once, ${seconds(schedule.delay_seconds)} after submission`;
  }
  if ("after" in schedule) {
    const on = schedule.after.on || "succeeded";
    const verb = on === "finished" ? "finishes" : on === "failed" ? "fails" : "succeeds";
    return `each time a run of job ${schedule.after.job_id} ${verb}`;
  }
  return JSON.stringify(schedule);
}

// The server's own end of a retry that a change dropped (duetime.domain.runs.not_retried, its
// reasons from duetime.services.job_reads.may_start): the whole error, or "; " and it at the
// error's very end, its reason one of the server's. Not "not retried: " anywhere: a target's
// answer is quoted in the error, and its words made a dead-lettered run read "not retried"
// (until 2026-12-01; an outside audit). A target can still end its text so: only a field of
// the run's own (an API change) would tell them apart for sure.
const NOT_RETRIED = /(?:^|; )not retried: (the job is cancelled|the job is paused|the job is missing|the job was paused or changed since)$/;

/** Why a job deserves attention, from its last run ("" when it does not): a run that failed
 * for good (after its last attempt, so it went to the dead-letter queue; or its retry ended by
 * a cancel, a pause or a new schedule, its error ending "; not retried: <reason>": dropped, not
 * in the DLQ), one that failed an attempt and is retrying, or one that started later than the
 * threshold. Until 2026-11-30 every failed run read "in the DLQ" (an outside audit). */
export function attention(lastRun, thresholdMs = LATE_THRESHOLD_MS) {
  if (!lastRun) return "";
  if (lastRun.status === "failed") {
    const [, reason] = String(lastRun.error ?? "").match(NOT_RETRIED) ?? [];
    return reason === undefined ? "failed, in the DLQ" : `failed, not retried (${reason})`;
  }
  if (lastRun.status === "retrying") return "failing, retrying";
  if (typeof lastRun.lateness_ms === "number" && lastRun.lateness_ms > thresholdMs) return "late";
  return "";
}
