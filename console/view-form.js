// Create / edit a job: every schedule kind and target type, errors placed at the field the
// API names (error.field), and a live preview of the next occurrences (POST /schedules/preview).
import { api, ApiError } from "./api.js";
import { claims, secondsLeft } from "./auth.js";
import { append, clear, h, notify, notifyNext } from "./dom.js";
import { describeSchedule, instant, json, parseExact, viewerZone } from "./format.js";

const KINDS = { cron: "Cron expression", rate: "Every N seconds", at: "Once, at an instant",
  delay: "Once, after a delay", after: "After another job's runs" };
const TARGETS = { http: ["url", "method"], sqs: ["queue_url"], sns: ["topic_arn"],
  eventbridge: ["source", "detail_type", "event_bus"], lambda: ["function_arn"], handler: ["name"] };
const PREVIEW_DELAY_MS = 400;
// The field without which a kind of schedule has nothing to preview.
const PREVIEWED_BY = { cron: "schedule.cron", rate: "schedule.rate_seconds", at: "schedule.at",
  delay: "schedule.delay_seconds", after: "schedule.after.job_id" };
// What was typed in the form on screen when its user was signed out (a refused or expired
// token), put back when the same user signs in again at the same address (app.js).
const KEPT = "duetime.form";
let typed = () => null;

/** At a sign-out: keeps the open form's values (in this tab's sessionStorage), or forgets
 * any kept (`keep` false: the person signed out, perhaps for someone else to sign in). */
export function keepTyped(keep) {
  const values = typed();
  if (!keep) sessionStorage.removeItem(KEPT);
  else if (values) sessionStorage.setItem(KEPT, JSON.stringify(values));
}

function kindOf(schedule) {
  if (!schedule) return "cron";
  if ("cron" in schedule) return "cron";
  if ("rate_seconds" in schedule) return "rate";
  if ("at" in schedule) return "at";
  if ("delay_seconds" in schedule) return "delay";
  return "after";
}

export function formView(main, job = null, etag = null) {
  const s = job?.schedule || {};
  const t = job?.target || { type: "http" };
  const inputs = {};
  const opened = {}; // each box's value as the form opened (an edit: the job's, as stored)
  // One labelled input with its error slot; `key` is the API's field name (error.field).
  const field = (key, label, input, help) => {
    const id = `f-${key.replace(/\W/g, "-")}`;
    input.id = id;
    input.name = key;
    inputs[key] = input;
    if (!(key in opened)) opened[key] = input.value;
    const error = h(`p.field-error#${id}-error`, { role: "alert" });
    input.setAttribute("aria-describedby", `${id}-error${help ? ` ${id}-help` : ""}`);
    return h("div.field", { dataset: { field: key } }, h("label", { for: id }, label), input,
      help ? h(`p.help#${id}-help`, {}, help) : null, error);
  };
  const text = (value, attrs = {}) => h("input", { type: "text", value: value ?? "", ...attrs });
  const select = (options, value) => h("select", {}, Object.entries(options).map(([k, v]) => h("option", { value: k, selected: k === value }, v)));
  const kind = select(KINDS, kindOf(job?.schedule));
  const targetType = select(Object.fromEntries(Object.keys(TARGETS).map((k) => [k, k])), t.type);
  const preview = h("ol#preview", { "aria-live": "polite" });
  const previewNote = h("p.help#preview-note", {}, "");
  const scheduleFields = {
    cron: [field("schedule.cron", "Cron expression", text(s.cron, { placeholder: "0 9 * * mon-fri" }), "minute hour day-of-month month day-of-week"),
      field("schedule.timezone", "Time zone", text(s.timezone || viewerZone(), { list: "zones" }))],
    rate: [field("schedule.rate_seconds", "Every (seconds)", h("input", { type: "number", min: 1, value: s.rate_seconds ?? 60 }))],
    at: [field("schedule.at", "At (RFC 3339)", text(s.at, { placeholder: "2026-12-01T09:00:00Z" }))],
    delay: [field("schedule.delay_seconds", "Delay (seconds)", h("input", { type: "number", min: 0, value: s.delay_seconds ?? 60 }))],
    after: [field("schedule.after.job_id", "Upstream job id", text(s.after?.job_id)),
      field("schedule.after.on", "When its run", select({ succeeded: "succeeds", failed: "fails", finished: "finishes" }, s.after?.on || "succeeded"))],
  };
  const bounds = [field("schedule.start_at", "Start at (optional)", text(s.start_at)),
    field("schedule.end_at", "End at (optional)", text(s.end_at))];
  const targetFields = {
    http: [field("target.url", "URL", text(t.url, { type: "url" })),
      field("target.method", "Method", select({ POST: "POST", GET: "GET", PUT: "PUT", PATCH: "PATCH", DELETE: "DELETE" }, t.method || "POST"))],
    sqs: [field("target.queue_url", "Queue URL", text(t.queue_url))],
    sns: [field("target.topic_arn", "Topic ARN", text(t.topic_arn))],
    eventbridge: [field("target.source", "Source", text(t.source)), field("target.detail_type", "Detail type", text(t.detail_type)),
      field("target.event_bus", "Event bus", text(t.event_bus || "default"))],
    lambda: [field("target.function_arn", "Function ARN", text(t.function_arn))],
    handler: [field("target.name", "Handler name", text(t.name, { placeholder: "duetime.noop" }))],
  };
  const scheduleBox = h("div.group");
  const targetBox = h("div.group");
  // The select stays focused as its fields are drawn again (an arrow key changes it at once:
  // until 2026-11-30 the focus fell to the page at each step; an outside audit).
  const redraw = (box, select, children) => {
    const focused = document.activeElement === select;
    append(clear(box), children());
    if (focused) select.focus();
  };
  const showSchedule = () => {
    redraw(scheduleBox, kind, () => [field("schedule.kind", "Kind", kind), scheduleFields[kind.value],
      ["cron", "rate"].includes(kind.value) ? bounds : null]);
    schedulePreview();
  };
  const showTarget = () => redraw(targetBox, targetType, () => [field("target.type", "Type", targetType), targetFields[targetType.value]]);
  kind.addEventListener("change", showSchedule);
  targetType.addEventListener("change", showTarget);

  const value = (key) => inputs[key]?.value.trim();
  // An edit sends only what the person changed (docs/api.md: a PATCH changes what it sends). A
  // box left as it opened keeps the stored value exactly, untrimmed: until 2026-12-01 a rename
  // sent back a cron "0 3 * * * " trimmed, a new schedule to the API, which re-armed the job
  // and dropped its run waiting for a retry (and an EventBridge source "billing " changed to
  // "billing"); an outside audit.
  const touched = (key) => inputs[key] !== undefined && inputs[key].value !== opened[key];
  const keysOf = (fields) => fields.map((div) => div.dataset.field);
  const scheduleKeys = () => keysOf([...scheduleFields[kind.value], ...(["cron", "rate"].includes(kind.value) ? bounds : [])]);
  const sameSchedule = () => job && kindOf(job.schedule) === kind.value;
  const scheduleChanged = () => !sameSchedule() || scheduleKeys().some(touched);
  const targetChanged = () => !job || job.target.type !== targetType.value || TARGETS[targetType.value].some((k) => touched(`target.${k}`));
  // `path` of `from` set in `to` (or removed from it, when `from` has none).
  const keep = (to, from, path) => {
    const last = path.at(-1);
    const stored = path.slice(0, -1).reduce((o, k) => o?.[k], from)?.[last];
    const parent = path.slice(0, -1).reduce((o, k) => o?.[k], to);
    if (!parent) return;
    if (stored === undefined) delete parent[last];
    else parent[last] = stored;
  };
  // A number box left empty, or holding what the browser cannot read as a number (its value
  // is then ""), goes as null, for the API's 400 at the field: Number("") is 0, which is
  // "now" for a delay (until 2026-11-30 an emptied delay box ran the job at once).
  const number = (key) => (value(key) ? Number(value(key)) : null);
  const schedule = () => {
    const out = {};
    switch (kind.value) {
      case "cron": out.cron = value("schedule.cron"); if (value("schedule.timezone")) out.timezone = value("schedule.timezone"); break;
      case "rate": out.rate_seconds = number("schedule.rate_seconds"); break;
      case "at": out.at = value("schedule.at"); break;
      case "delay": out.delay_seconds = number("schedule.delay_seconds"); break;
      default: out.after = { job_id: value("schedule.after.job_id"), on: value("schedule.after.on") };
    }
    if (["cron", "rate"].includes(kind.value)) {
      if (value("schedule.start_at")) out.start_at = value("schedule.start_at");
      if (value("schedule.end_at")) out.end_at = value("schedule.end_at");
    }
    if (sameSchedule()) {
      for (const key of scheduleKeys()) if (!touched(key)) keep(out, job.schedule, key.split(".").slice(1));
    }
    return out;
  };
  // An update replaces the target whole: of the same type, the job's fields the form does not
  // show (an http target's headers) go back as they were; but not to another origin (as a
  // browser drops Authorization on a redirect there): credentials are for their host.
  const origin = (url) => { try { return new URL(url).origin; } catch { return null; } };
  let droppedHeaders = false;
  const target = () => {
    const out = job?.target?.type === targetType.value ? { ...job.target } : { type: targetType.value };
    for (const key of TARGETS[targetType.value]) {
      if (job?.target?.type === targetType.value && !touched(`target.${key}`)) continue; // as stored
      if (value(`target.${key}`)) out[key] = value(`target.${key}`);
      else delete out[key];
    }
    droppedHeaders = Boolean(out.headers && Object.keys(out.headers).length && origin(out.url) !== origin(job.target.url));
    if (droppedHeaders) delete out.headers;
    return out;
  };
  // One key:value a line (a value may hold commas; a key has no ":"). Left as it was opened,
  // the box is not sent: an edit of something else keeps the tags exactly.
  const tagsText = Object.entries(job?.tags || {}).map(([k, v]) => `${k}:${v}`).join("\n");
  const tags = () => job && value("tags") === tagsText.trim() ? undefined
    : Object.fromEntries(value("tags").split("\n").map((x) => x.trim()).filter(Boolean)
      .map((pair) => { const i = pair.indexOf(":"); return i < 0 ? [pair, ""] : [pair.slice(0, i).trim(), pair.slice(i + 1).trim()]; }));

  // Clears the messages of the fields whose key starts with `prefix`; all of them and the
  // form's own (a conflict) without one. The preview clears the schedule's only: an answer
  // that lands after a submit must not erase what the submit said.
  const clearErrors = (prefix = "") => {
    for (const [key, input] of Object.entries(inputs)) {
      if (!key.startsWith(prefix)) continue;
      const slot = main.querySelector(`#${input.id}-error`);
      if (slot) slot.textContent = "";
      input.removeAttribute("aria-invalid");
    }
    if (!prefix) clear(formError);
  };
  // The error goes to the field the API names, or to its closest shown parent field. A submit's
  // error takes the focus there; a preview's does not: it lands while the person may be typing
  // in another field, and their keys must stay where they type them.
  const shownKey = (field) => {
    let key = field || "";
    while (key && !(inputs[key]?.isConnected)) key = key.includes(".") ? key.slice(0, key.lastIndexOf(".")) : "";
    return key;
  };
  const showError = (error, { focus = true } = {}) => {
    const key = shownKey(error.field);
    const slot = key ? main.querySelector(`#${inputs[key].id}-error`) : formError;
    slot.textContent = error.field && !key ? `${error.field}: ${error.message}` : error.message;
    if (key) inputs[key].setAttribute("aria-invalid", "true");
    if (key && focus) inputs[key].focus();
  };

  let timer = null;
  let asked = 0;
  function schedulePreview() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!form.isConnected) return; // the form was left (or drawn again) meanwhile
      const mine = ++asked;
      const sched = schedule();
      if (!value(PREVIEWED_BY[kind.value])) { // nothing to preview yet: no error for a field not filled in
        clearErrors("schedule.");
        clear(preview);
        previewNote.textContent = "No preview.";
        return;
      }
      // An `after` job has no occurrences of its own: the API's preview refuses it (a 400 at
      // schedule.after, which was shown as the form's own error, an alert, until 2026-12-01;
      // an outside audit). Said in words instead.
      if (kind.value === "after") {
        clearErrors("schedule.");
        clear(preview);
        previewNote.textContent = `${describeSchedule(sched)}: it has no occurrences of its own.`;
        return;
      }
      // An expired token is not sent in the background: its 401 would sign the person out
      // while they type (until 2026-11-30; an outside audit). A save's 401 signs them out with
      // their values kept (keepTyped), and back once they sign in again.
      if ((secondsLeft() ?? 1) <= 0) {
        clear(preview);
        previewNote.textContent = "No preview: your session has expired. What you typed is kept when you save and sign in again.";
        return;
      }
      const zone = sched.timezone || "UTC";
      try {
        const occurrences = await api.preview(sched, 5, job?.created_at);
        if (mine !== asked || !form.isConnected) return;
        clearErrors("schedule.");
        previewNote.textContent = `${describeSchedule(sched)}: the next ${occurrences.length} occurrences, in ${zone} and in your zone (${viewerZone()}).`;
        append(clear(preview), occurrences.map((o) => h("li", { dataset: { instant: o } },
          h("time", { datetime: o }, instant(o, zone)), " · ", instant(o))));
      } catch (e) {
        if (mine !== asked || !form.isConnected) return;
        clear(preview);
        previewNote.textContent = "No preview.";
        if (e instanceof ApiError && e.status === 400) {
          clearErrors("schedule.");
          // At a box of the schedule; never the form's own slot (an alert): that is a submit's.
          if (e.field?.startsWith("schedule.") && shownKey(e.field).startsWith("schedule.")) showError(e, { focus: false });
          else previewNote.textContent = `No preview: ${e.message}`;
        }
      }
    }, PREVIEW_DELAY_MS);
  }
  main.addEventListener("input", (event) => {
    if (event.target.name?.startsWith("schedule.")) schedulePreview();
  });

  const formError = h("p.field-error#form-error", { role: "alert" });
  // Left as it was opened, the payload box is not sent (as the tags): an edit of something
  // else keeps the payload exactly. One key per values sent: a double-click, or a retry of a
  // request whose answer was lost, makes one job (until 2026-11-30 two: an outside audit).
  const payloadText = job?.payload == null ? "" : json(job.payload);
  // The key goes with the values it was first sent with: values changed since (corrected after
  // a failure) are another request, with a key of their own (until 2026-12-01 a corrected save
  // after a lost answer was refused, "Idempotency-Key ... already used for a different
  // request", at every try; an outside audit).
  const newKey = () => crypto.randomUUID?.() ?? Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  let submitKey = newKey();
  let keyedBody = null;
  let submitting = false;
  const form = h("form.card#job-form", { novalidate: true, on: { submit: async (event) => {
    event.preventDefault();
    if (submitting) return;
    // A preview due, or on its way, would clear the schedule's errors this submit may show
    // (a flaky test saw an emptied delay box's error vanish 400 ms after it was shown).
    clearTimeout(timer);
    asked += 1;
    clearErrors();
    const body = {};
    if (!job || touched("name")) body.name = value("name") || null;
    if (!job || scheduleChanged()) body.schedule = schedule();
    droppedHeaders = false;
    if (targetChanged()) body.target = target();
    const tagged = tags();
    if (tagged !== undefined) body.tags = tagged;
    const payload = value("payload");
    try {
      if (!job || payload !== payloadText.trim()) body.payload = payload ? parseExact(payload) : null;
    } catch {
      showError({ field: "payload", message: "not valid JSON" });
      return;
    }
    if (!job) body.priority = value("priority");
    if (!job) {
      const sent = JSON.stringify(body);
      if (keyedBody !== null && sent !== keyedBody) submitKey = newKey();
      keyedBody = sent;
    }
    const save = form.querySelector("#save");
    submitting = true;
    save.disabled = true;
    try {
      const saved = job ? (await api.updateJob(job.id, body, etag)).json : await api.createJob(body, submitKey);
      const dropped = droppedHeaders ? " Its target's headers were not kept: they were for another host (set them again with the API or the CLI)." : "";
      notifyNext(job ? `Job updated.${dropped}` : "Job created.", "ok");
      location.hash = `#/jobs/${encodeURIComponent(saved.id)}`;
    } catch (e) {
      if (e instanceof ApiError && e.status === 412) {
        clear(formError).append("Someone changed this job since you opened it (version conflict): nothing was saved. ",
          h("a", { href: `#/jobs/${encodeURIComponent(job.id)}/edit`, on: { click: () => setTimeout(() => window.dispatchEvent(new HashChangeEvent("hashchange"))) } }, "Reload the job"), " and edit it again.");
      } else if (e instanceof ApiError) showError(e);
      // No answer: the job may have been made even so.
      else if (!job) notify(`${e.message}: no answer came, and the job may have been created even so: look in the jobs list. Saving these values again makes no second job; saving changed ones does.`, "error");
      else notify(e.message, "error");
    } finally {
      submitting = false;
      save.disabled = false;
    }
  } } },
    h("h1", {}, job ? `Edit ${job.name || job.id}` : "New job"),
    h("fieldset", {}, h("legend", {}, "Job"),
      field("name", "Name", text(job?.name)),
      field("tags", "Tags (key:value, one per line)", h("textarea", { rows: 3, value: tagsText })),
      job ? null : field("priority", "Priority", select({ normal: "normal", high: "high", low: "low" }, "normal"))),
    h("fieldset", {}, h("legend", {}, "Schedule"), scheduleBox,
      h("section.preview", { "aria-labelledby": "preview-title" }, h("h2#preview-title", {}, "Next occurrences"), previewNote, preview)),
    h("fieldset", {}, h("legend", {}, "Target"), targetBox,
      field("payload", "Payload (JSON, optional)", h("textarea", { rows: 3, value: payloadText }))),
    formError,
    h("div.actions", {}, h("button.primary#save", { type: "submit" }, job ? "Save changes" : "Create job"),
      h("a.button", { href: job ? `#/jobs/${encodeURIComponent(job.id)}` : "#/jobs" }, "Cancel")));
  // The zone box's suggestions (the API checks the zone against its own tzdata).
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  form.append(h("datalist#zones", {}, ["UTC", ...zones.filter((z) => z !== "UTC")].map((z) => h("option", { value: z }))));
  main.append(form);
  const user = claims()?.sub;
  typed = () => form.isConnected && { route: location.hash, user, etag,
    values: Object.fromEntries(Array.from(form.elements, (e) => [e.name, e.value]).filter(([name]) => name)) };
  const kept = JSON.parse(sessionStorage.getItem(KEPT) || "null");
  sessionStorage.removeItem(KEPT);
  const restore = kept?.values && kept.route === location.hash && kept.user === user ? kept.values : null;
  if (restore) {
    etag = kept.etag; // the version it was typed against: a change made meanwhile is a 412
    kind.value = restore["schedule.kind"] ?? kind.value;
    targetType.value = restore["target.type"] ?? targetType.value;
  }
  showSchedule();
  showTarget();
  if (restore) {
    for (const [name, value] of Object.entries(restore)) if (inputs[name]) inputs[name].value = value;
    notify("What you typed before being signed out is back: check it, then save.", "info");
  }
}
