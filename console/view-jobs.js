// The jobs list: filters (status, tag k:v, name prefix), paging with next_cursor, highlights.
import { api } from "./api.js";
import { clear, h, notify } from "./dom.js";
import { attention, describeSchedule, duration, instant, LATE_THRESHOLD_MS } from "./format.js";

const STATUSES = ["", "scheduled", "paused", "succeeded", "failed", "cancelled", "completed"];
const LABELS = { status: "Status", tag: "Tag (key:value)", name_prefix: "Name starts with" };

function filtersFrom(params) {
  return { status: params.get("status") || "", tag: params.get("tag") || "",
    name_prefix: params.get("name_prefix") || "" };
}

export async function jobsView(main, params) {
  const filters = filtersFrom(params);
  const body = h("tbody");
  const more = h("button#more", { type: "button", hidden: true }, "Load more");
  // Each box with its error slot: a filter the API refuses (its 400 names it, error.field) is
  // marked and said at its box (until 2026-12-01 only the API's words, naming no filter).
  const boxes = {};
  const field = (name, input) => {
    boxes[name] = input;
    input.setAttribute("aria-describedby", `filter-${name}-error`);
    return h("div.field", {}, h("label", { for: `filter-${name}` }, LABELS[name]), input,
      h(`p.field-error#filter-${name}-error`));
  };
  const form = h("form.filters#filters", { role: "search", "aria-label": "Filter jobs", on: { submit: (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const search = new URLSearchParams();
    for (const [k, v] of data) if (v) search.set(k, String(v).trim());
    location.hash = `#/jobs${search.size ? `?${search}` : ""}`;
  } } },
    // A status from the address that is none of these is shown as it is (the API refuses it),
    // not as "any".
    field("status", h("select#filter-status", { name: "status" },
      [...STATUSES, ...(STATUSES.includes(filters.status) ? [] : [filters.status])]
        .map((s) => h("option", { value: s, selected: s === filters.status }, s || "any")))),
    field("tag", h("input#filter-tag", { name: "tag", value: filters.tag, placeholder: "team:payments" })),
    field("name_prefix", h("input#filter-name_prefix", { name: "name_prefix", value: filters.name_prefix })),
    h("button", { type: "submit" }, "Filter"));
  main.append(
    h("div.title", {}, h("h1", {}, "Jobs"), h("a.button.primary", { href: "#/new" }, "New job")),
    form,
    h("p.help", {}, `Highlighted: the last run failed (and went to the dead-letter queue, unless a cancel or pause ended its retries), is retrying, or started more than ${duration(LATE_THRESHOLD_MS)} late.`),
    h("table.jobs#jobs", { tabindex: -1 },
      h("caption.visually-hidden", {}, "Jobs, newest first"),
      h("thead", {}, h("tr", {}, ["Status", "Name", "Schedule", "Next run", "Last run", "Tags"].map((c) => h("th", { scope: "col" }, c)))),
      body),
    more);
  let cursor = null;
  let looked = 0; // jobs the API has looked through for the filters (a page reads 50)
  const load = async () => {
    const focused = document.activeElement === more; // before it is disabled
    more.disabled = true;
    try {
      const page = await api.listJobs({ ...filters, limit: 50, cursor: cursor ?? "" });
      body.querySelector("tr.none")?.remove();
      const rows = page.items.map(row);
      body.append(...rows);
      cursor = page.next_cursor;
      looked += 50;
      // The last page: the button hides, and the focus it had goes to the first job it
      // loaded (or the table), not to the page's <body> (until 2026-12-01; an outside audit).
      if (!cursor && focused) (rows[0]?.querySelector("a") ?? main.querySelector("#jobs")).focus();
      more.hidden = !cursor;
      // A filtered page may hold no match while more follow (docs/api.md): said in words, not
      // an empty table (until 2026-11-30; an outside audit).
      if (!body.children.length) {
        body.append(h("tr.none", {}, h("td", { colspan: 6 }, cursor
          ? `No matches among the newest ${looked} jobs yet: Load more to search further.` : "No jobs match.")));
      }
    } catch (e) {
      const box = boxes[e.field];
      if (box) {
        box.setAttribute("aria-invalid", "true");
        main.querySelector(`#filter-${e.field}-error`).textContent = e.message;
        if (!body.children.length) body.append(h("tr.none", {}, h("td", { colspan: 6 }, "This filter was refused: no jobs listed.")));
      }
      notify(box ? `${LABELS[e.field]}: ${e.message}` : e.message, "error");
    } finally {
      more.disabled = false;
    }
  };
  more.addEventListener("click", load);
  await load();
}

function row(job) {
  const reason = attention(job.last_run);
  // A run that never started (skipped, buffered) has no lateness to show.
  const started = job.last_run && job.last_run.lateness_ms != null
    && !["skipped", "buffered"].includes(job.last_run.status);
  const last = job.last_run
    ? [h(`span.badge.${job.last_run.status}`, {}, job.last_run.status),
      started ? ` ${duration(job.last_run.lateness_ms)} late` : null,
      reason ? h("strong.reason", {}, ` — ${reason}`) : null]
    : "never";
  return h(`tr${reason ? ".attention" : ""}`, { dataset: { jobId: job.id } },
    h("td", {}, h(`span.badge.${job.status}`, {}, job.status)),
    h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.name || job.id)),
    h("td", {}, describeSchedule(job.schedule)),
    h("td", {}, instant(job.next_run_at)),
    h("td", {}, last),
    h("td", {}, Object.entries(job.tags || {}).map(([k, v]) => h("span.tag", {}, `${k}:${v}`))));
}

export { clear };
