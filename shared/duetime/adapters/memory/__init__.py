"""In-memory twins of the ports: the readable reference implementation, one module per area
(`jobs`, `timers`, `runs`, `queues`, `secrets`).

They honour the same contracts as the AWS adapters (tests/integration/test_contracts.py runs
one suite against both) and let the core be exercised without an emulator.
"""
