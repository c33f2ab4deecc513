"""A run-now's instant (POST /jobs/{id}/run): the first millisecond from the request on that no
other run of the job has, reserved so that two requests in one millisecond are two runs."""

from __future__ import annotations

from duetime.domain.errors import DomainError
from duetime.domain.jobs import Job
from duetime.ports import JobStore
from duetime.services.dependencies import Dependencies
from duetime.services.dispatch import Dispatcher
from duetime.services.idempotency import key_expires_at, run_now_slot


class RunNowInstants:
    def __init__(self, jobs: JobStore, dispatcher: Dispatcher, deps: Dependencies) -> None:
        self._jobs = jobs
        self._dispatcher = dispatcher
        self._deps = deps

    def reserve(self, job: Job, now: int) -> int:
        """The instant of a run asked for at `now`: the first millisecond from `now` on that no
        other run of the job has, as a run's id is its instant: not an occurrence of its
        schedule, and not taken by another run-now (reserved by a conditional record kept a
        day, `run_now_slot`: two requests in one millisecond were one run). A run of an
        `after` job triggered by its upstream's run has that run's instant: instants are
        reserved for the whole chain, under the id of the job at its top, whose occurrences
        they skip."""
        top = self._top_of_chain(job)
        instant = now
        while self._dispatcher.next_due(top, instant) == instant or (
            self._jobs.claim_key(
                job.tenant,
                run_now_slot(top.id, instant),
                job.id,
                "run-now slot",
                key_expires_at(instant),
                now // 1000,
            )
            is not None
        ):
            instant += 1
        return instant

    def _top_of_chain(self, job: Job) -> Job:
        """The job at the top of an `after` job's chain of upstreams, as far as it is readable
        (the job itself for any other)."""
        try:
            chain = self._deps.check(job.tenant, job.spec.schedule, job)
        except DomainError:  # its upstream is gone: nothing triggers it
            return job
        return chain[-1] if chain else job
