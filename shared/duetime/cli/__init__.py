"""The `duetime` command line: `main` builds the parser from the command modules (`jobs`,
`history`, `dlq`, `timers`, …), which share the API client, the output formatting and the
argument types."""
