"""DynamoDB adapters for the job, timer and run stores, one module per store.

Tables (see duetime.resources): jobs (tenant, id), `jobs`, with the table's keys and its
idempotency records in `job_table`; timers (pk =
`<yyyymmddHHMM>#<shard>`, sk = `<due ms>#<job id>`, plus one `~sweep` item per partition, one
`sweeper#<shard>` state item per shard, the `sweeper`/`shards` count, and `stuck#<shard>`
partitions of stuck timers), `timers`, with its items' keys and values in `timer_items`; runs
(job_id, scheduled_ms) with a stream for the archiver, `runs`. `common` holds what they share:
batch calls that resend unprocessed items, query pages and their cursors, failed conditions.
"""
