// The console's entry point: sign-in state, hash routing and navigation.
//   #/jobs[?status=&tag=&name_prefix=]   #/jobs/<id>   #/jobs/<id>/edit   #/new   #/system
import { claims, completeOidcSignIn, currentToken, loadConfig, onSignOut, signOutEverywhere } from "./auth.js";
import { clear, h, notify, takeCarried } from "./dom.js";
import { formView, keepTyped } from "./view-form.js";
import { editView, jobView } from "./view-job.js";
import { jobsView } from "./view-jobs.js";
import { signInView } from "./view-signin.js";
import { canSeeSystem, systemView } from "./view-system.js";

const main = document.getElementById("main");
let operator = false;
let leave = null;

function route() {
  const [path, search = ""] = (location.hash.replace(/^#/, "") || "/jobs").split("?");
  // A malformed escape (#/jobs/%E0) is kept as typed: the API then answers not found.
  const decode = (part) => { try { return decodeURIComponent(part); } catch { return part; } };
  const parts = path.split("/").filter(Boolean).map(decode);
  return { parts, params: new URLSearchParams(search) };
}

async function render() {
  if (leave) { leave(); leave = null; }
  // Each render draws into a container of its own: what an earlier render's view still does
  // (an answer that lands late, its listeners, its timers) stays in that view's detached
  // container and never reaches the page drawn since.
  const view = h("div.view");
  clear(main).append(view);
  const signedIn = Boolean(currentToken());
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("who").hidden = !signedIn;
  if (!signedIn) {
    signInView(view, start);
    return;
  }
  const { parts, params } = route();
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === (parts[0] || "jobs")) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (parts[0] === "new") formView(view);
    else if (parts[0] === "system" && operator) leave = systemView(view);
    else if (parts[0] === "jobs" && parts[1] && parts[2] === "edit") await editView(view, parts[1], formView);
    else if (parts[0] === "jobs" && parts[1]) await jobView(view, parts[1]);
    else await jobsView(view, params);
  } catch (e) {
    view.append(h("p.notice.error", { role: "alert" }, e.status === 404 ? "Not found (or not yours)." : e.message));
  }
  // The new view gets the focus (a screen reader reads it from the top), unless the person is
  // already in one of its fields: a list that loads while they type a filter keeps their keys.
  if (view.isConnected && !view.contains(document.activeElement)) main.focus({ preventScroll: true });
}

/** After signing in: who, and whether the operator view exists for this token. */
async function start() {
  const who = claims();
  document.getElementById("who-tenant").textContent = who?.sub ? `Signed in as ${who.sub}` : "Signed in";
  operator = await canSeeSystem();
  document.getElementById("nav-system").hidden = !operator;
  await render();
}

onSignOut((reason) => {
  // Signed out by the API (a refused or expired token), not by the person: the form they
  // were typing in is kept, and back when they sign in again (until 2026-11-30 it was lost).
  keepTyped(Boolean(reason));
  operator = false;
  document.getElementById("nav-system").hidden = true;
  notify(reason || "Signed out.");
  render();
});

document.getElementById("sign-out").addEventListener("click", () => signOutEverywhere());
// "Skip to content" moves the focus, not the address: its #main is no route (until 2026-12-01
// it went to the jobs list, and a form's typing was lost; an outside audit).
document.querySelector("a.skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
// A notice belongs to the page it was given on: moving to another clears it (and shows the
// one given for the next page, if any: "Job updated.").
window.addEventListener("hashchange", () => {
  notify(...takeCarried());
  render();
});

(async () => {
  await loadConfig();
  try {
    await completeOidcSignIn();
  } catch (e) {
    notify(e.message, "error");
  }
  if (currentToken()) await start();
  else await render();
})();
