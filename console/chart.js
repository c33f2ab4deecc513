// The lateness of recent runs as an inline SVG bar chart (no library).
import { duration, LATE_THRESHOLD_MS } from "./format.js";

const NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const node = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** runs: newest first, as the API lists them. */
export function latenessChart(runs, { width = 640, height = 160 } = {}) {
  const points = runs.filter((r) => typeof r.lateness_ms === "number").slice(0, 40).reverse();
  const figure = document.createElement("figure");
  figure.className = "chart";
  const caption = document.createElement("figcaption");
  caption.textContent = `Lateness of the last ${points.length} started runs (oldest left)`;
  if (!points.length) {
    caption.textContent = "No started runs yet: no lateness to chart.";
    figure.append(caption);
    return figure;
  }
  const pad = { left: 56, bottom: 20, top: 10, right: 8 };
  const max = Math.max(LATE_THRESHOLD_MS * 1.2, ...points.map((p) => p.lateness_ms));
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const y = (ms) => pad.top + plotH - (Math.max(ms, 0) / max) * plotH;
  const barW = plotW / points.length;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": caption.textContent, class: "lateness" });
  root.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: y(0), y2: y(0), class: "axis" }));
  root.append(svg("text", { x: pad.left - 4, y: y(max) + 10, "text-anchor": "end", class: "tick" }, duration(max)));
  root.append(svg("text", { x: pad.left - 4, y: y(0), "text-anchor": "end", class: "tick" }, "0"));
  const limit = y(LATE_THRESHOLD_MS);
  root.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: limit, y2: limit, class: "threshold" }));
  root.append(svg("text", { x: width - pad.right, y: limit - 3, "text-anchor": "end", class: "tick" },
    `late: ${duration(LATE_THRESHOLD_MS)}`));
  points.forEach((run, i) => {
    const late = run.lateness_ms > LATE_THRESHOLD_MS || run.status === "failed";
    const bar = svg("rect", { x: pad.left + i * barW + 1, y: y(run.lateness_ms),
      width: Math.max(barW - 2, 1), height: Math.max(y(0) - y(run.lateness_ms), 1),
      class: late ? "bar bad" : "bar" });
    bar.append(svg("title", {}, `${run.scheduled_for}: ${duration(run.lateness_ms)} (${run.status})`));
    root.append(bar);
  });
  figure.append(root, caption);
  return figure;
}
