"""A module whose attribute a kernel of tests/stale_kernel_globals.py reads."""
FACTOR = 100
