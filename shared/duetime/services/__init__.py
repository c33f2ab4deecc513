"""Use cases that combine the pure core with the ports: submit, sweep, execute."""
