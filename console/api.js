// The duetime HTTP API (docs/api.md), same origin, with the signed-in user's bearer token.
import { currentToken, signOut } from "./auth.js";
import { parseExact } from "./format.js";

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "http_error";
    this.field = error.field ?? null;
  }
}

async function call(method, path, { body, headers = {} } = {}) {
  const token = currentToken();
  const init = { method, headers: { ...headers, Authorization: `Bearer ${token}` } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const reply = await fetch(path, init);
  const text = await reply.text();
  // An answer that is not JSON (a proxy's HTML page) is its status alone: until 2026-11-30 the
  // parser's own words were shown, and a 401 in HTML signed nobody out (an outside audit).
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { if (reply.ok) throw new ApiError(reply.status, null); }
  // A job's payload as written (its numbers exact: parseExact).
  if (json && typeof json === "object" && "payload" in json) json.payload = parseExact(text).payload;
  // A refused token signs its user out; a 401 for a token replaced since (another user signed
  // in while the request was on its way) concerns nobody signed in now.
  if (reply.status === 401 && currentToken() === token) {
    // The view's own error then says what the sign-in page says (on AWS the authorizer's
    // answer is `{"message": "Unauthorized"}`: it showed "HTTP 401").
    const reason = "Your token was refused or has expired: sign in again.";
    signOut(reason);
    throw new ApiError(401, { error: { code: "unauthorized", message: reason } });
  }
  // 304: the job is at the version the request's If-None-Match names (json null).
  if (!reply.ok && reply.status !== 304) throw new ApiError(reply.status, json);
  return { json, etag: reply.headers.get("ETag") };
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const item of [].concat(value ?? [])) if (item !== "") search.append(name, item);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

const job = (id) => `/jobs/${encodeURIComponent(id)}`;

// A rate without start_at is anchored one interval after its job's creation
// (docs/schedules.md), not after the preview's request: a job's own occurrences are previewed
// from that anchor, as a start_at (one in the past starts on its grid from now on).
function anchored(schedule, createdAt) {
  if (!createdAt || !schedule.rate_seconds || schedule.start_at) return schedule;
  const anchor = new Date(Date.parse(createdAt) + schedule.rate_seconds * 1000);
  return Number.isNaN(anchor.getTime()) ? schedule : { ...schedule, start_at: anchor.toISOString() };
}

export const api = {
  listJobs: async (filters) => (await call("GET", `/jobs${query(filters)}`)).json,
  // `etag`: the version held; then json is null while the job is still at it (304).
  getJob: (id, etag = null) => call("GET", job(id), { headers: etag ? { "If-None-Match": etag } : {} }),
  // `key`: the form's Idempotency-Key, so that a retried or repeated submit makes one job.
  createJob: async (body, key) =>
    (await call("POST", "/jobs", { body, headers: key ? { "Idempotency-Key": key } : {} })).json,
  updateJob: (id, changes, etag) =>
    call("PATCH", job(id), { body: changes, headers: etag ? { "If-Match": etag } : {} }),
  pause: async (id) => (await call("POST", `${job(id)}/pause`)).json,
  resume: async (id) => (await call("POST", `${job(id)}/resume`)).json,
  cancel: async (id) => (await call("DELETE", job(id))).json,
  runNow: async (id) => (await call("POST", `${job(id)}/run`)).json,
  backfill: async (id, range) => (await call("POST", `${job(id)}/backfill`, { body: range })).json,
  runs: async (id, limit = 50, cursor = "") => (await call("GET", `${job(id)}/runs${query({ limit, cursor })}`)).json,
  // `createdAt`: the job's, for its own occurrences (null: a job submitted now).
  preview: async (schedule, count = 5, createdAt = null) =>
    (await call("POST", "/schedules/preview", { body: { schedule: anchored(schedule, createdAt), count } })).json.occurrences,
  stats: async () => (await call("GET", "/admin/stats")).json,
};
