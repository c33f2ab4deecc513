// Signing in. Two modes, chosen by config.json (served by the API, docs/console.md):
// - "token": the user pastes a bearer token (`duetime token --tenant <you>` locally);
// - "oidc": OpenID Connect authorization code flow with PKCE (S256) against the issuer.
// Tokens live in sessionStorage only: gone when the tab closes, never in localStorage or a cookie.

const TOKEN = "duetime.token";
const ID_TOKEN = "duetime.id_token"; // OIDC: handed back to the provider at sign-out only
const VERIFIER = "duetime.pkce.verifier";
const STATE = "duetime.pkce.state";
const RETURN_TO = "duetime.pkce.return";

let config = { auth: "token" };
const listeners = new Set();

export async function loadConfig() {
  const reply = await fetch("/console/config.json", { cache: "no-cache" });
  config = reply.ok ? await reply.json() : { auth: "token" };
  return config;
}

export const authMode = () => config.auth;
export const currentToken = () => sessionStorage.getItem(TOKEN);
export const onSignOut = (listener) => listeners.add(listener);

export function signInWithToken(token) {
  const value = token.trim().replace(/^Bearer\s+/i, "");
  if (!claims(value)) throw new Error("That is not a JWT (three base64url parts separated by dots).");
  sessionStorage.setItem(TOKEN, value);
}

export function signOut(reason = "") {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(ID_TOKEN);
  for (const listener of listeners) listener(reason);
}

/** The "Sign out" button: the tab's tokens go, and with OpenID Connect the provider's session
 * too, when its discovery names an end_session_endpoint (RP-initiated logout 1.0; until
 * 2026-11-30 the provider's session stayed open: the next "Sign in" on a shared computer went
 * straight through; found by an outside audit). The provider sends the browser back here. */
export async function signOutEverywhere() {
  const idToken = sessionStorage.getItem(ID_TOKEN);
  signOut();
  if (config.auth !== "oidc") return;
  let meta = null;
  try { meta = await discovery(); } catch { return; /* signed out here at least */ }
  const url = logoutUrl(meta, config.client_id, redirectUri(), idToken);
  if (url) location.assign(url);
}

/** Where the provider ends its session, or null: the discovery's end_session_endpoint, else
 * Cognito's `/logout` on its token endpoint's domain (Cognito's discovery names none). */
export function logoutUrl(meta, clientId, back, idToken = null) {
  const end = meta?.end_session_endpoint;
  if (typeof end === "string" && /^https?:\/\//.test(end)) {
    const params = new URLSearchParams({ client_id: clientId, post_logout_redirect_uri: back });
    if (idToken) params.set("id_token_hint", idToken);
    return `${end}?${params}`;
  }
  let token = null;
  try { token = new URL(meta?.token_endpoint); } catch { return null; }
  if (token.protocol !== "https:" || !token.hostname.endsWith(".amazoncognito.com")) return null;
  return `${token.origin}/logout?${new URLSearchParams({ client_id: clientId, logout_uri: back })}`;
}

/** The token's claims, decoded for display only (the API verifies the token, not us). */
export function claims(token = currentToken()) {
  try {
    const [, payload] = (token || "").split(".");
    const bytes = Uint8Array.from(atob(payload.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes)); // UTF-8 ("Zürich" read as "ZÃ¼rich" before)
  } catch {
    return null;
  }
}

/** Seconds until the token expires (negative: expired), or null without `exp`. */
export function secondsLeft(token = currentToken()) {
  const exp = claims(token)?.exp;
  return typeof exp === "number" ? Math.round(exp - Date.now() / 1000) : null;
}

// --- OpenID Connect, authorization code + PKCE -------------------------------------------

function base64url(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(size = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

async function discovery() {
  const issuer = config.issuer.replace(/\/$/, "");
  const reply = await fetch(`${issuer}/.well-known/openid-configuration`);
  if (!reply.ok) throw new Error(`OpenID discovery failed: HTTP ${reply.status}`);
  const meta = await reply.json();
  // OpenID Connect Discovery §4.3: the document names the issuer asked for, exactly.
  if (String(meta.issuer || "").replace(/\/$/, "") !== issuer) {
    throw new Error("OpenID discovery names another issuer than the console's: sign-in stopped.");
  }
  return meta;
}

/** The console's one address (register it at the identity provider as the redirect URI). */
function redirectUri() {
  return `${location.origin}/console/`;
}

/** Sends the browser to the identity provider. */
export async function startOidcSignIn() {
  const meta = await discovery();
  const verifier = randomString(48);
  const state = randomString(16);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  sessionStorage.setItem(VERIFIER, verifier);
  sessionStorage.setItem(STATE, state);
  sessionStorage.setItem(RETURN_TO, location.hash || "#/jobs");
  const params = new URLSearchParams({
    response_type: "code",
    client_id: config.client_id,
    redirect_uri: redirectUri(),
    scope: config.scopes || "openid",
    state,
    code_challenge: base64url(digest),
    code_challenge_method: "S256",
  });
  location.assign(`${meta.authorization_endpoint}?${params}`);
}

/** On the way back from the identity provider (?code=&state=): trades the code for tokens.
 * Returns true when it handled a callback. */
export async function completeOidcSignIn() {
  const params = new URLSearchParams(location.search);
  if (config.auth !== "oidc" || !(params.has("code") || params.has("error"))) return false;
  const expected = sessionStorage.getItem(STATE);
  const verifier = sessionStorage.getItem(VERIFIER);
  const back = sessionStorage.getItem(RETURN_TO) || "#/jobs";
  sessionStorage.removeItem(STATE);
  sessionStorage.removeItem(VERIFIER);
  sessionStorage.removeItem(RETURN_TO);
  history.replaceState(null, "", `${location.pathname}${back}`);
  // The state first: an answer this tab did not ask for (a crafted link) shows none of its
  // words, its error text included.
  if (!expected || params.get("state") !== expected || !verifier) {
    throw new Error("Sign-in answer does not match this tab's request (state): try again.");
  }
  if (params.has("error")) throw new Error(`Sign-in refused: ${params.get("error_description") || params.get("error")}`);
  const meta = await discovery();
  const reply = await fetch(meta.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code"),
      redirect_uri: redirectUri(),
      client_id: config.client_id,
      code_verifier: verifier,
    }),
  });
  if (!reply.ok) throw new Error(`The identity provider refused the code: HTTP ${reply.status}`);
  const tokens = await reply.json();
  // The API's authorizer takes JWTs only: an opaque access token (or none) would sign in a
  // user every call then signs out (until 2026-11-30 it was stored as given).
  if (typeof tokens.access_token !== "string" || !claims(tokens.access_token)) {
    throw new Error("The identity provider's access token is not a JWT, which the API needs (docs/console.md).");
  }
  sessionStorage.setItem(TOKEN, tokens.access_token);
  if (typeof tokens.id_token === "string") sessionStorage.setItem(ID_TOKEN, tokens.id_token);
  return true;
}
