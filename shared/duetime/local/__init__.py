"""Emulators of what AWS does around the functions, for the local stack and the tests:
moto stores but never runs (no event source mappings, no scheduled rules)."""
