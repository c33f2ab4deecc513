"""duetime's CDK app: one Stack (`DuetimeStack`) composed of Constructs, and the reusable
`Scheduler` construct (`infra.scheduler`) that platform teams can embed in their own apps."""
