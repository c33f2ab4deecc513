// The jobs list: filters (status, tag k:v, name prefix), paging with next_cursor, highlights.
import { api } from "./api.js";
import { clear, h, notify } from "./dom.js";
import { attention, describeSchedule, duration, instant, LATE_THRESHOLD_MS } from "./format.js";

const STATUSES = ["", "scheduled", "paused", "succeeded", "failed", "cancelled", "completed"];

function filtersFrom(params) {
  return { status: params.get("status") || "", tag: params.get("tag") || "",
    name_prefix: params.get("name_prefix") || "" };
}

export async function jobsView(main, params) {
  const filters = filtersFrom(params);
  const body = h("tbody");
  const more = h("button#more", { type: "button", hidden: true }, "Load more");
  const field = (name, label, input) => h("div.field", {}, h("label", { for: `filter-${name}` }, label), input);
  const form = h("form.filters#filters", { role: "search", "aria-label": "Filter jobs", on: { submit: (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const search = new URLSearchParams();
    for (const [k, v] of data) if (v) search.set(k, String(v).trim());
    location.hash = `#/jobs${search.size ? `?${search}` : ""}`;
  } } },
    field("status", "Status", h("select#filter-status", { name: "status" },
      STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s || "any")))),
    field("tag", "Tag (key:value)", h("input#filter-tag", { name: "tag", value: filters.tag, placeholder: "team:payments" })),
    field("name_prefix", "Name starts with", h("input#filter-name_prefix", { name: "name_prefix", value: filters.name_prefix })),
    h("button", { type: "submit" }, "Filter"));
  main.append(
    h("div.title", {}, h("h1", {}, "Jobs"), h("a.button.primary", { href: "#/new" }, "New job")),
    form,
    h("p.help", {}, `Highlighted: the last run failed (and went to the dead-letter queue, unless a cancel or pause ended its retries), is retrying, or started more than ${duration(LATE_THRESHOLD_MS)} late.`),
    h("table.jobs#jobs", {},
      h("caption.visually-hidden", {}, "Jobs, newest first"),
      h("thead", {}, h("tr", {}, ["Status", "Name", "Schedule", "Next run", "Last run", "Tags"].map((c) => h("th", { scope: "col" }, c)))),
      body),
    more);
  let cursor = null;
  let looked = 0; // jobs the API has looked through for the filters (a page reads 50)
  const load = async () => {
    more.disabled = true;
    try {
      const page = await api.listJobs({ ...filters, limit: 50, cursor: cursor ?? "" });
      body.querySelector("tr.none")?.remove();
      for (const job of page.items) body.append(row(job));
      cursor = page.next_cursor;
      looked += 50;
      more.hidden = !cursor;
      // A filtered page may hold no match while more follow (docs/api.md): said in words, not
      // an empty table (until 2026-11-30; an outside audit).
      if (!body.children.length) {
        body.append(h("tr.none", {}, h("td", { colspan: 6 }, cursor
          ? `No matches among the newest ${looked} jobs yet: Load more to search further.` : "No jobs match.")));
      }
    } catch (e) {
      notify(e.message, "error");
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
