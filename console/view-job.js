// One job: every field, the next occurrences (its zone and the viewer's), runs, the lateness
// chart and the actions (pause, resume, cancel, run now, edit, backfill).
import { api, ApiError } from "./api.js";
import { latenessChart } from "./chart.js";
import { append, clear, definitions, h, notify, notifyNext, shownNotice } from "./dom.js";
import { attention, describeSchedule, duration, instant, json, shownTarget, viewerZone } from "./format.js";

const RUNS_REFRESH_MS = 3000;

// The page drawn again (app.js), with the job as it is now.
const redraw = () => window.dispatchEvent(new HashChangeEvent("hashchange"));

// A refusal for the job's state (409) or version (412) draws the job again as it is now, the
// refusal said on it (until 2026-11-30 the page kept offering what the API had refused).
function refused(message, e) {
  if (e.status === 409 || e.status === 412) {
    notifyNext(message, "error");
    redraw();
  } else notify(message, "error");
}

export async function jobView(main, id) {
  const { json: job } = await api.getJob(id);
  const zone = job.schedule.timezone || "UTC";
  const act = (label, call, show = true) => show
    ? h("button", { type: "button", dataset: { action: label.toLowerCase().replace(/\s/g, "-") }, on: { click: async (event) => {
      // Off while its request is on its way: a double-click on "Run now" started two runs
      // (until 2026-11-30; an outside audit).
      const button = event.currentTarget;
      if (button.disabled) return;
      button.disabled = true;
      try {
        await call();
        // Shown on the page drawn again (until 2026-11-30 the move erased it at once).
        notifyNext(`${label}: done.`, "ok");
        redraw();
      } catch (e) { refused(e instanceof ApiError ? `${label}: ${e.message}` : e.message, e); }
      finally { button.disabled = false; }
    } } }, label)
    : null;
  const recurring = "cron" in job.schedule || "rate_seconds" in job.schedule;
  // docs/api.md: "only recurring and `after` jobs pause" (until 2026-12-01 the console offered
  // Pause on recurring ones only; an outside audit).
  const pausable = recurring || "after" in job.schedule;
  const upcoming = recurring && job.status === "scheduled"; // a paused job has no next runs
  const live = ["scheduled", "paused"].includes(job.status);
  // Completed once its last occurrence is handed over: until end_at (+ jitter) its runs still
  // to come can be cancelled (docs/api.md, cancel).
  const ending = job.status === "completed" && job.schedule.end_at
    && Date.parse(job.schedule.end_at) + (job.jitter_seconds || 0) * 1000 > Date.now();
  // A backfill: of a scheduled or completed recurring job (docs/api.md; until 2026-11-30 also
  // offered on a paused one, which the API refuses, and on a completed one only past end_at).
  const backfillable = recurring && (job.status === "scheduled" || job.status === "completed");
  const from = h("input#backfill-from", { type: "text", name: "from", placeholder: "2026-11-20T00:00:00Z", required: true });
  const to = h("input#backfill-to", { type: "text", name: "to", placeholder: "2026-11-21T00:00:00Z", required: true });
  // Its button is off while its request is on its way, as the actions' (until 2026-12-01 a
  // double-click sent two backfills, the second saying "0 occurrence(s) queued"; an outside audit).
  const backfillButton = h("button", { type: "submit" }, "Backfill");
  const backfill = h("form.inline#backfill", { on: { submit: async (event) => {
    event.preventDefault();
    if (backfillButton.disabled) return;
    backfillButton.disabled = true;
    try {
      const { occurrences } = await api.backfill(job.id, { from: from.value.trim(), to: to.value.trim() });
      notify(`Backfill: ${occurrences} occurrence(s) queued.`, "ok");
    } catch (e) { refused(e.field ? `Backfill (${e.field}): ${e.message}` : `Backfill: ${e.message}`, e); }
    finally { backfillButton.disabled = false; }
  } } }, h("label", { for: "backfill-from" }, "From"), from, h("label", { for: "backfill-to" }, "To"), to,
    backfillButton);
  // The runs shown, by run_id: the first page, refreshed, and the older pages "Load older
  // runs" follows next_cursor to (until 2026-11-30 the newest 50 only; an outside audit).
  const runs = new Map();
  let cursor; // past the oldest page loaded: the first answer's, then each older page's
  const body = h("tbody#runs-body");
  const chart = h("div#chart");
  let drawn = null; // the runs as last drawn: a refresh that changed nothing leaves the table be
  const showRuns = (page, older = false, focused = false) => {
    if (older || cursor === undefined) cursor = page.next_cursor;
    // The last page loaded: the button hides, and the focus it had goes to the table, not to
    // the page's <body> (until 2026-12-01; an outside audit).
    if (!cursor && focused) main.querySelector("#runs")?.focus();
    loadOlder.hidden = !cursor;
    for (const run of page.items) runs.set(run.run_id, run);
    const items = [...runs.values()].sort((a, b) => String(b.scheduled_for).localeCompare(String(a.scheduled_for)));
    // Drawn again only when a run changed: a selection in the table (a run's error, to copy)
    // and a screen reader's place in it stay (until 2026-12-01 it was rebuilt every 3 s).
    const now = JSON.stringify(items);
    if (now === drawn) return;
    drawn = now;
    append(clear(body), items.map((run) => h(`tr${attention(run) ? ".attention" : ""}`, { dataset: { runId: run.run_id } },
      h("td", {}, h(`span.badge.${run.status}`, {}, run.status)), h("td", {}, String(run.attempts)),
      h("td", {}, instant(run.scheduled_for)), h("td", {}, instant(run.started_at)), h("td", {}, instant(run.finished_at)),
      h("td", {}, duration(run.lateness_ms)), h("td", {}, run.error ?? ""))));
    if (!items.length) body.append(h("tr", {}, h("td", { colspan: 7 }, "No runs yet.")));
    clear(chart).append(latenessChart(items));
  };
  const loadOlder = h("button#older-runs", { type: "button", hidden: true, on: { click: async () => {
    if (loadOlder.disabled) return;
    const focused = document.activeElement === loadOlder; // before it is disabled
    loadOlder.disabled = true;
    try { showRuns(await api.runs(job.id, 50, cursor), true, focused); } catch (e) { notify(e.message, "error"); }
    finally { loadOlder.disabled = false; }
  } } }, "Load older runs");
  const reason = attention(job.last_run);
  append(main, [
    h("div.title", {}, h("h1", {}, job.name || job.id), h(`span.badge.${job.status}#job-status`, {}, job.status),
      reason ? h("strong.reason", {}, reason) : null),
    h("div.actions#actions", {},
      act("Pause", () => api.pause(job.id), pausable && job.status === "scheduled"),
      act("Resume", () => api.resume(job.id), job.status === "paused"),
      act("Run now", () => api.runNow(job.id), job.status === "scheduled"),
      live ? h("a.button", { href: `#/jobs/${encodeURIComponent(job.id)}/edit` }, "Edit") : null,
      act("Cancel job", () => { if (!confirm("Cancel this job? No further runs start.")) throw new Error("Not cancelled."); return api.cancel(job.id); }, live || ending)),
    definitions([
      ["Id", h("code", {}, job.id)], ["Schedule", describeSchedule(job.schedule)],
      ["Next run", h("span#next-run", { dataset: { instant: job.next_run_at ?? "" } }, instant(job.next_run_at, zone), " · ", instant(job.next_run_at))],
      ["Target", h("code#job-target", {}, shownTarget(job.target))], ["Payload", h("code#job-payload", {}, json(job.payload))],
      ["Tags", Object.entries(job.tags || {}).map(([k, v]) => h("span.tag", {}, `${k}:${v}`))],
      ["Description", job.description], ["Priority", job.priority], ["Runtime", job.runtime],
      ["Retry", `${job.retry.max_attempts} attempts, backoff ${job.retry.backoff_seconds}–${job.retry.max_backoff_seconds} s`],
      ["Timeout", `${job.timeout_seconds} s`], ["Catch-up", `${job.catchup.mode}, window ${job.catchup.window_seconds} s`],
      ["Jitter", `${job.jitter_seconds} s`], ["Staged", `${job.stage_seconds ?? 0} s`], ["Overlap", job.overlap ?? "allow"], ["Version", String(job.version)],
      ["Created", instant(job.created_at)], ["Updated", instant(job.updated_at)],
    ]),
    upcoming ? h("section", { "aria-labelledby": "next-title" }, h("h2#next-title", {}, "Next 5 occurrences"),
      h("table#occurrences", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, `Job's zone (${zone})`), h("th", { scope: "col" }, `Your zone (${viewerZone()})`))),
        h("tbody#occurrences-body"))) : null,
    h("section", { "aria-labelledby": "runs-title" }, h("h2#runs-title", {}, "Runs"), chart,
      h("table#runs", { tabindex: -1 }, h("thead", {}, h("tr", {}, ["Status", "Attempts", "Scheduled", "Started", "Finished", "Lateness", "Error"].map((c) => h("th", { scope: "col" }, c)))),
        body), loadOlder),
    backfillable ? h("section", { "aria-labelledby": "backfill-title" }, h("h2#backfill-title", {}, "Backfill"),
      h("p.help", {}, "Run the occurrences in [from, to) that never ran (RFC 3339 instants)."), backfill) : null]);
  if (upcoming) {
    api.preview(job.schedule, 5, job.created_at).then((list) => {
      const body = main.querySelector("#occurrences-body");
      if (body) append(body, list.map((o) => h("tr", { dataset: { instant: o } }, h("td", {}, instant(o, zone)), h("td", {}, instant(o)))));
    }).catch((e) => notify(`Preview: ${e.message}`, "error"));
  }
  const refreshRuns = async (again = false) => {
    if (!body.isConnected) return; // the view was left or drawn again
    try {
      // The job too, when it changed since (another client's cancel, its completion): 304
      // while it is at the version drawn (until 2026-11-30 only the runs were refreshed). Not
      // while a backfill range is being typed in: once the focus has left it.
      const { json: changed } = again ? await api.getJob(job.id, `"${job.version}"`) : {};
      if (!body.isConnected) return;
      if (changed && !backfill.contains(document.activeElement)) {
        notifyNext("This job has changed since its page was drawn: it is shown as it is now.");
        redraw();
        return;
      }
      const page = await api.runs(job.id, 50);
      if (!body.isConnected) return;
      // A one-off's status is its run's, whose end changes no version of the job: drawn
      // again when that run has ended (its badge stayed `scheduled`, until 2026-11-30).
      const own = !recurring && job.status === "scheduled" && page.items.find((r) => r.scheduled_for === job.next_run_at);
      // The notice shown ("Job created.") stays on the page drawn again (until 2026-12-01 the
      // redraw erased it; an outside audit).
      if (own && ["succeeded", "failed"].includes(own.status)) { notifyNext(...shownNotice()); redraw(); return; }
      showRuns(page);
    } catch (e) { notify(e.message, "error"); }
    setTimeout(refreshRuns, RUNS_REFRESH_MS, true);
  };
  await refreshRuns();
}

export async function editView(main, id, formView) {
  const { json: job, etag } = await api.getJob(id);
  formView(main, job, etag);
}
