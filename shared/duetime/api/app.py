"""The HTTP API: a Powertools `APIGatewayHttpResolver` (payload format 2.0) over JobService.

Each route parses its input, calls the service and shapes the answer with duetime.api.views.
Errors are raised, never formatted in a route: duetime.api.responses turns them into HTTP
(its status table `ERROR_STATUS`). The OpenAPI document (duetime.api.openapi) describes
exactly `ROUTES`. Which methods a path answers (405 with `Allow`, HEAD wherever GET) is
duetime.api.routing; the JSON body every route reads is duetime.api.body.

The tenant is the JWT claim named by DUETIME_TENANT_CLAIM (default `sub`), as API Gateway's
JWT authorizer passes it in `requestContext.authorizer.jwt.claims`; it never comes from the
body. API Gateway has already verified the token (signature, issuer, audience, expiry).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from duetime.api import admin as admin_route
from duetime.api import backfill as backfill_route
from duetime.api import console, views
from duetime.api import preview as preview_route
from duetime.api.batch import batch_route
from duetime.api.body import (
    MAX_BODY_BYTES,  # noqa: F401 - re-exported: the API's limit
    json_body,
    no_body,
)
from duetime.api.openapi import OPENAPI, query_parameters
from duetime.api.params import (
    checked_id,
    idempotency_key,
    if_match,
    if_none_match,
    known_query,
    parse_cursor,
    parse_job_filter,
    parse_limit,
    parse_status,
    precondition,
)
from duetime.api.quotas import TenantLimiter
from duetime.api.responses import (
    JsonResponse,
    MethodNotAllowed,
    Unauthorized,
    error_response,
    job_response,
    json_response,
    status_of,
)
from duetime.api.routing import HeadResolver, allowed_methods, methods_of, shadowed
from duetime.clock import wall_ms
from duetime.domain.errors import (
    DomainError,
    NotFound,
    PreconditionFailed,
    ValidationError,
)
from duetime.domain.jobs import parse_job_spec
from duetime.observability import logger
from duetime.ports import Page
from duetime.services.backfill import Backfill
from duetime.services.batch import BatchSubmitter
from duetime.services.jobs import JobService, JobView
from duetime.services.operator_stats import OperatorStats
from duetime.services.webhook_secrets import WebhookSecrets
from duetime.settings import ApiSettings

T = TypeVar("T")

MAX_TENANT_CHARS = 256

# Every (method, path) the API serves; the OpenAPI document has exactly these operations.
# HEAD is served wherever GET is (duetime.api.routing), without an entry of its own.
ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/health"),
    ("GET", "/openapi.json"),
    ("POST", "/jobs"),
    ("POST", "/jobs/batch"),
    ("GET", "/jobs"),
    ("GET", "/jobs/{id}"),
    ("PATCH", "/jobs/{id}"),
    ("DELETE", "/jobs/{id}"),
    ("POST", "/jobs/{id}/pause"),
    ("POST", "/jobs/{id}/resume"),
    ("POST", "/jobs/{id}/run"),
    ("GET", "/jobs/{id}/runs"),
    ("POST", "/jobs/{id}/backfill"),
    ("POST", "/schedules/preview"),
    ("GET", "/admin/stats"),
    ("GET", "/webhook-secret"),
    ("POST", "/webhook-secret/rotate"),
)
PUBLIC_ROUTES = frozenset({("GET", "/health"), ("GET", "/openapi.json")})
# The routes that take an Idempotency-Key; on another change the header is a 400, not ignored
# (since 2026-11-30: a retried rotation with one rotated twice; POST /jobs/batch says more,
# below). A read ignores it (a proxy may add one to every request).
KEYED_ROUTES = frozenset({("POST", "/jobs"), ("POST", "/jobs/{id}/run"), ("POST", "/jobs/batch")})


def build_app(
    service: JobService,
    settings: ApiSettings | None = None,
    *,
    clock: Callable[[], int] = wall_ms,
    limiter: TenantLimiter | None = None,
    webhook_secrets: WebhookSecrets | None = None,
    backfill: Backfill | None = None,
    operator_stats: OperatorStats | None = None,
) -> APIGatewayHttpResolver:
    """The resolver with every route. `webhook_secrets` serves /webhook-secret, `backfill`
    /jobs/{id}/backfill and `operator_stats` /admin/stats; without them those routes answer
    500 (a wiring mistake, logged)."""
    settings = settings or ApiSettings()
    quotas = settings.quotas
    limiter = limiter or TenantLimiter(quotas.submissions_per_second, quotas.submission_burst)
    # Every request with a token spends one (since 2026-11-30: only submissions did, and one
    # tenant's reads could hold the others'; a security audit, round six).
    requests = TenantLimiter(quotas.requests_per_second, quotas.request_burst, what="requests")
    app = HeadResolver()

    def route(method: str, path: str) -> Callable[[Callable[..., JsonResponse]], Any]:
        if (method, path) not in ROUTES:
            raise ValueError(f"{method} {path} is not in ROUTES (and the OpenAPI document)")
        register = app.route(path.replace("{id}", "<job_id>"), methods_of(method))
        if (method, path) in PUBLIC_ROUTES:  # probes may add what they like
            return register
        allowed = query_parameters(method, path)

        def checked(handler: Callable[..., JsonResponse]) -> Any:
            @functools.wraps(handler)
            def with_known_query(*args: Any, **kwargs: Any) -> JsonResponse:
                # The token first (401), then its request rate (429), then the query and the
                # headers (400), as api.md orders them (until 2026-11-30 these 400s came first
                # and spent no token; an outside security audit).
                tenant()
                known_query(app.current_event.query_string_parameters or {}, allowed)
                if (
                    method != "GET"  # (and HEAD: a read makes nothing twice)
                    and (method, path) not in KEYED_ROUTES
                    and "Idempotency-Key" in (app.current_event.headers or {})
                ):
                    raise ValidationError("Idempotency-Key", f"not taken by {method} {path}")
                return handler(*args, **kwargs)

            return register(with_known_query)

        return checked

    def tenant() -> str:
        """The token's tenant, who spends a request token: once a request (kept in the
        resolver's context, which each request clears; one request at a time)."""
        if (known := app.context.get("tenant")) is not None:
            return str(known)
        found = tenant_from_event(app.current_event.raw_event, settings.tenant_claim)
        logger.thread_safe_append_keys(tenant=found)
        requests.take(found)
        app.context["tenant"] = found
        return found

    def query(name: str) -> str | None:
        return app.current_event.get_query_string_value(name)

    @route("GET", "/health")
    def health() -> JsonResponse:
        return json_response(HTTPStatus.OK, {"status": "ok"})

    @route("GET", "/openapi.json")
    def openapi() -> JsonResponse:
        return json_response(HTTPStatus.OK, OPENAPI)

    @route("POST", "/jobs")
    def create_job() -> JsonResponse:
        owner = tenant()
        limiter.take(owner)
        key = idempotency_key(app.current_event.headers.get("Idempotency-Key"))
        spec = parse_job_spec(json_body(app.current_event.raw_event))
        job = service.create(owner, spec, idempotency_key=key, quotas=quotas)
        # With a key this may be a replay: show the job as it is now (it may have run or been
        # cancelled since). A new job has no run yet.
        view = service.get(owner, job.id) if key else JobView(job, job.status, None)
        created = job_response(HTTPStatus.CREATED, view, clock())
        created.headers["Location"] = f"/jobs/{job.id}"
        return created

    def batch_body() -> object:
        # Each job of a batch carries its own key: a header for the batch was ignored, and a
        # batch retried with it made its jobs again (until 2026-11-30: an outside audit).
        if app.current_event.headers.get("Idempotency-Key") is not None:
            raise ValidationError(
                "Idempotency-Key",
                "not taken by POST /jobs/batch: give each job its own idempotency_key",
            )
        return json_body(app.current_event.raw_event)

    batch = batch_route(
        BatchSubmitter(service), tenant, batch_body, limiter, quotas, clock, status_of
    )
    route("POST", "/jobs/batch")(batch)

    @route("GET", "/jobs")
    def list_jobs() -> JsonResponse:
        owner = tenant()
        status = parse_status(query("status"))
        limit = parse_limit(query("limit"))
        cursor = parse_cursor(query("cursor"))
        match = parse_job_filter(app.current_event.raw_event)
        # A page reads each job's last run: one request token more per 10 jobs asked for.
        requests.charge(owner, (limit - 1) // 10)
        page = _read_page(lambda: service.list(owner, limit, cursor, match), cursor)
        # Filtered on the effective status after the read: a page may hold fewer than `limit`
        # items (even none) while `next_cursor` says more follow.
        items = [view for view in page.items if status is None or view.status == status]
        return json_response(HTTPStatus.OK, views.jobs_page_json(items, page.cursor, clock()))

    # A read and a status change honour If-Match as an update does (412 on another version).
    def expected() -> frozenset[int] | None:
        return if_match(header("If-Match"))

    def header(name: str) -> str | None:
        return app.current_event.headers.get(name)

    def conditions(owner: str, job_id: str, *, with_if_match: bool = False) -> None:
        """If-None-Match on a change (a 412 if the job is at a version it names; `*`: any),
        and If-Match where the service does not take it (run now, backfill: it was ignored,
        and a stale one started runs; found by an outside audit)."""
        named, wanted = header("If-None-Match"), header("If-Match") if with_if_match else None
        if named is not None or wanted is not None:
            precondition(service.get(owner, job_id).job, wanted, named)

    @route("GET", "/jobs/{id}")
    def get_job(job_id: str) -> JsonResponse:
        # RFC 9110 13.1: a read evaluates If-Match (a 412) and If-None-Match (a 304, with the
        # ETag and no body; HEAD as GET).
        wanted, unchanged = expected(), if_none_match(header("If-None-Match"))
        view = service.get(tenant(), checked_id(job_id))
        if wanted is not None and view.job.version not in wanted:
            raise PreconditionFailed(view.job.id, wanted, view.job.version)
        if unchanged is not None and unchanged(view.job.version):
            etag = {"ETag": f'"{view.job.version}"', "Cache-Control": "no-store"}
            return Response(status_code=HTTPStatus.NOT_MODIFIED.value, headers=etag, body="")
        return job_response(HTTPStatus.OK, view, clock())

    def job_body(owner: str, job_id: str, read: Callable[[Mapping[str, Any]], T]) -> T:
        """The body of a request about one job, read by `read` (json_body, or no_body for
        the requests that take none)."""
        try:
            return read(app.current_event.raw_event)
        except ValidationError:
            service.get(owner, job_id)  # an unknown job is a 404 before a bad body is a 400
            raise

    @route("PATCH", "/jobs/{id}")
    def update_job(job_id: str) -> JsonResponse:
        owner = tenant()
        job_id = checked_id(job_id)
        limiter.take(owner)  # a PATCH may start a run (a new schedule), as a submission does
        versions = expected()
        changes = job_body(owner, job_id, json_body)
        conditions(owner, job_id)
        view = service.update(owner, job_id, changes, if_match=versions, quotas=quotas)
        return job_response(HTTPStatus.OK, view, clock())

    def bodiless(job_id: str, *, with_conditions: bool = True) -> tuple[str, str]:
        """The tenant and the job id of a request that changes one job and takes no body. A
        malformed If-Match is a 400 before If-None-Match is looked at (RFC 9110 13.2.2; it was
        a 412 on cancel, pause and resume when If-None-Match named the job's version)."""
        owner, job_id = tenant(), checked_id(job_id)
        expected()
        job_body(owner, job_id, no_body)
        if with_conditions:
            conditions(owner, job_id)
        return owner, job_id

    @route("DELETE", "/jobs/{id}")
    def cancel_job(job_id: str) -> JsonResponse:
        view = service.cancel(*bodiless(job_id), if_match=expected())
        return job_response(HTTPStatus.OK, view, clock())

    @route("POST", "/jobs/{id}/pause")
    def pause_job(job_id: str) -> JsonResponse:
        view = service.pause(*bodiless(job_id), if_match=expected())
        return job_response(HTTPStatus.OK, view, clock())

    @route("POST", "/jobs/{id}/resume")
    def resume_job(job_id: str) -> JsonResponse:
        owner, job_id = bodiless(job_id)
        # A resume sends the job's next run, as a submission does (free, 1,500 resumes put
        # 1,500 runs on the shared queue at one instant; a security audit, round five).
        limiter.take(owner)
        view = service.resume(owner, job_id, if_match=expected())
        return job_response(HTTPStatus.OK, view, clock())

    @route("POST", "/jobs/{id}/run")
    def run_job(job_id: str) -> JsonResponse:
        owner, job_id = bodiless(job_id, with_conditions=False)
        limiter.take(owner)
        key = idempotency_key(app.current_event.headers.get("Idempotency-Key"))
        # If-Match and If-None-Match gate the first request: a repeat with its key answers
        # its run (a 412 told a client whose run had started to try again; an outside audit).
        wanted, named = header("If-Match"), header("If-None-Match")
        # The runs its `after` jobs make, counted before its run is sent and charged once it
        # is (counted after, a count that failed left the runs sent and uncharged: a security
        # audit, round seven).
        asked = clock()  # its runs trigger the `after` jobs there are by then: those counted
        fanned = service.fan_out(owner, job_id)
        scheduled_ms = service.run_now(
            owner,
            job_id,
            idempotency_key=key,
            check=lambda job: precondition(job, wanted, named),
            asked_ms=asked,
        )
        limiter.charge(owner, fanned)
        return json_response(HTTPStatus.ACCEPTED, views.run_now_json(job_id, scheduled_ms))

    @route("GET", "/jobs/{id}/runs")
    def list_runs(job_id: str) -> JsonResponse:
        owner = tenant()
        limit = parse_limit(query("limit"))
        cursor = parse_cursor(query("cursor"))
        job_id = checked_id(job_id)
        page = _read_page(lambda: service.list_runs(owner, job_id, limit, cursor), cursor)
        return json_response(HTTPStatus.OK, views.runs_page_json(page))

    body = lambda: json_body(app.current_event.raw_event)  # noqa: E731
    backfill_route.register(
        route,
        backfill,
        tenant=tenant,
        body=body,
        checked_id=checked_id,
        limiter=limiter,
        conditions=lambda owner, job_id: conditions(owner, job_id, with_if_match=True),
        fan_out=service.fan_out,
        clock=clock,
    )
    preview_route.register(route, tenant=tenant, body=body, clock=clock)
    admin_route.register(
        route,
        operator_stats,
        event=lambda: app.current_event.raw_event,
        tenant=tenant,
        claim=settings.operator_claim,
        scope=settings.operator_scope,
    )

    def secrets() -> WebhookSecrets:
        if webhook_secrets is None:
            raise RuntimeError("build_app was given no webhook_secrets")
        return webhook_secrets

    @route("GET", "/webhook-secret")
    def get_webhook_secret() -> JsonResponse:
        owner = tenant()
        found = secrets().get(owner)
        return json_response(HTTPStatus.OK, views.webhook_secret_json(found, clock()))

    @route("POST", "/webhook-secret/rotate")
    def rotate_webhook_secret() -> JsonResponse:
        owner = tenant()
        no_body(app.current_event.raw_event)
        found = secrets().rotate(owner)
        return json_response(HTTPStatus.OK, views.webhook_secret_json(found, clock()))

    console.register(app, settings.console)  # the web console's files: not API routes

    def refuse_method() -> JsonResponse:
        method = app.current_event.http_method
        path = app.current_event.path
        allow = allowed_methods(ROUTES, path) or console.methods_on(path)
        # A path the resolver could not match for a method we serve there (an id with
        # characters no job id has) is simply not found.
        if allow and method not in allow:
            return error_response(
                MethodNotAllowed(f"{method} is not allowed on {path[:200]}", allow)
            )
        return error_response(NotFound(f"no route {method} {path[:200]}"))

    # A literal path is refused the methods of the {id} route that would read it as an id
    # (GET /jobs/batch is not the job "batch"): registered, they are tried before that route.
    for literal, methods in shadowed(ROUTES).items():
        app.route(literal, methods)(refuse_method)

    @app.not_found
    def no_route(_: NotFoundError) -> JsonResponse:
        return refuse_method()

    def unexpected(exc: Exception) -> JsonResponse:
        logger.exception("unhandled error")
        return json_response(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            {"error": {"code": "internal", "message": "internal error"}},
        )

    # The one place errors become HTTP. Lookup follows the exception's MRO, so every
    # DomainError gets its mapped status and anything else is a JSON 500.
    app.exception_handler(DomainError)(error_response)
    app.exception_handler(Exception)(unexpected)

    return app


# --- request parsing (pure) ----------------------------------------------------------------


def tenant_from_event(event: Mapping[str, Any], claim: str) -> str:
    """The tenant: the named claim of the JWT that API Gateway verified."""
    value: object = event
    for key in ("requestContext", "authorizer", "jwt", "claims", claim):
        value = value.get(key) if isinstance(value, Mapping) else None
    if not isinstance(value, str) or not value.strip():
        raise Unauthorized(f"the bearer token has no {claim!r} claim naming the tenant")
    if len(value) > MAX_TENANT_CHARS or not value.isprintable():
        raise Unauthorized(f"the token's {claim!r} claim is not a usable tenant name")
    if value.startswith("[") and value.endswith("]"):
        # How API Gateway renders an array claim: ["a", "b"], ["a b"] and the string "[a b]"
        # would be one tenant (until 2026-11-30: found by an outside audit).
        raise Unauthorized(f"the token's {claim!r} claim must be one string, not a list")
    return value


def _read_page(read: Callable[[], Page[T]], cursor: str | None) -> Page[T]:
    """A store raises ValueError for a cursor it cannot read: the client's mistake."""
    try:
        return read()
    except ValueError:
        if cursor is None:
            raise
        raise ValidationError("cursor", "not a cursor from a previous page") from None
