"""The constructs the `Scheduler` is composed of, one per concern."""
