"""Reference solvers for cross-checks: exhaustive enumeration on small instances.

Nothing in the runtime package imports this subpackage; the tests and the benchmarks use it
to check the DP and the MILP formulations against plain enumeration.
"""
