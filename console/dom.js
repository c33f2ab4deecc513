// Building DOM nodes without innerHTML: every value the API returns is text, never markup.

/** h("tag.class#id", {attr: value, on: {click: fn}}, ...children) */
export function h(spec, attrs = {}, ...children) {
  const [tagAndClasses, id] = spec.split("#");
  const [tag, ...classes] = tagAndClasses.split(".");
  const node = document.createElement(tag || "div");
  if (id) node.id = id;
  if (classes.length) node.className = classes.join(" ");
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === "dataset") {
      Object.assign(node.dataset, value);
    } else if ((name in node && typeof value !== "string") || (name === "value" && "value" in node)) {
      // A property: a <textarea> shows its `value` property, never a `value` attribute.
      node[name] = value;
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

let carried = ["", "info"];

/** A notice for the page being moved to: a move clears the current page's notice, then shows
 * this one (`takeCarried`, console/app.js). */
export function notifyNext(message, kind = "info") {
  carried = [message, kind];
}

export function takeCarried() {
  const notice = carried;
  carried = ["", "info"];
  return notice;
}

/** The notice shown now, as [message, kind] ("" when none): to carry it to the page drawn again. */
export function shownNotice() {
  const shown = document.querySelector("#notice .notice");
  return shown ? [shown.textContent, [...shown.classList].find((c) => c !== "notice") ?? "info"] : ["", "info"];
}

/** Shows a short message in the live region (read out by screen readers). */
export function notify(message, kind = "info") {
  const region = document.getElementById("notice");
  clear(region);
  if (message) region.append(h(`p.notice.${kind}`, {}, message));
}

/** A definition list from [term, value] pairs. */
export function definitions(pairs) {
  return h("dl.fields", {}, pairs.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value ?? "—")]));
}
