// The operators' view: GET /admin/stats, refreshed every few seconds while shown.
import { api } from "./api.js";
import { clear, h, notify } from "./dom.js";
import { duration, instant } from "./format.js";

export const REFRESH_MS = 5000;

/** Whether the token may see the system view (GET /admin/stats answers 200). */
export async function canSeeSystem() {
  try {
    await api.stats();
    return true;
  } catch {
    return false;
  }
}

export function systemView(main) {
  const holder = h("div#system-stats", { "aria-live": "polite" }, "Loading…");
  main.append(h("div.title", {}, h("h1", {}, "System"),
    h("p.help", {}, `Refreshed every ${REFRESH_MS / 1000} s.`)), holder);
  let timer = null;
  const refresh = async () => {
    if (!holder.isConnected) return; // the view was left
    try {
      render(holder, await api.stats());
    } catch (e) {
      notify(e.message, "error");
    }
    timer = setTimeout(refresh, REFRESH_MS);
  };
  refresh();
  return () => clearTimeout(timer);
}

const num = (v) => (v === null || v === undefined ? "—" : String(v));
// Whole seconds, as the API gives them ("0 s", "42 s", "3.5 min").
const secs = (v) => (v === null || v === undefined ? "—" : v < 60 ? `${v} s` : duration(v * 1000));

function table(id, caption, head, rows) {
  return h(`table#${id}`, {}, h("caption", {}, caption),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows));
}

function render(holder, stats) {
  const runs = stats.runs_last_hour;
  clear(holder).append(
    h("p.help", {}, `As of ${instant(stats.generated_at)}`),
    h("section.figures", { "aria-label": "Runs in the last hour" },
      h("div.figure", {}, h("span", {}, "Runs started (1 h)"), h("strong#runs-started", {}, num(runs.started))),
      h("div.figure", {}, h("span", {}, "Runs failed (1 h)"), h("strong#runs-failed", {}, num(runs.failed))),
      h("div.figure", {}, h("span", {}, "Lateness p50"), h("strong", {}, duration(runs.lateness_ms.p50))),
      h("div.figure", {}, h("span", {}, "Lateness p99"), h("strong", {}, duration(runs.lateness_ms.p99)))),
    table("queues", "Queues", ["Queue", "Depth", "In flight", "Delayed", "Oldest", "DLQ depth"],
      stats.queues.map((q) => h(`tr${q.dlq_depth > 0 ? ".attention" : ""}`, {},
        h("th", { scope: "row" }, q.name), h("td", {}, num(q.depth)), h("td", {}, num(q.in_flight)),
        h("td", {}, num(q.delayed)), h("td", {}, secs(q.oldest_age_seconds)), h("td", {}, num(q.dlq_depth))))),
    table("shards", "Sweep lag per shard", ["Shard", "Lag"],
      stats.shards.map((s) => h("tr", {}, h("th", { scope: "row" }, num(s.shard)), h("td", {}, secs(s.lag_seconds))))));
}
