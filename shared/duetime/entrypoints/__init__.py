"""The Lambda handlers, thin: one module per function, `duetime.entrypoints.<name>.handler`
(api, sweeper, coordinator, reconciler, worker, archiver, compactor), each turning its event
into a call of the services and the result into a response. What they call comes from
duetime.wiring, built from the environment on the first invocation; the functions the local
stack runs have `make_handler(...)` too, the same handler over what the caller built.

The CDK app names them (infra.packaging.handler) and ships them in the Lambda asset with the
rest of the package. Nothing else in duetime imports them, except the local stack
(duetime.local.stack), which runs the whole system on one machine and so invokes the same
handlers as AWS would; the tests import them too.
"""
