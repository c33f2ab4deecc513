"""In-memory twins of the ports: the readable reference implementation, one module per area
(`jobs`, `timers`, `runs`, `queues`, `secrets`, `targets`). The sweep launcher's twin runs the
sweeps in this process: `InProcessLauncher`, beside the coordinator that uses it.

They honour the same contracts as the AWS adapters (tests/integration/test_contracts.py and
test_contracts_runners.py run one suite against both) and let the core be exercised without an
emulator.
"""
