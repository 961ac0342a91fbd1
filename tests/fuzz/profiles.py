"""Hypothesis settings profiles for the fuzz harness.

``fuzz-ci`` is what the default ``pytest`` run uses: derandomized (the same
cases on every run and machine, so CI is deterministic), no example database,
no deadline (the machine is shared and timing is not the property). The
number of cases is set per test; together they run >= 2,000 cases.
``bench/fuzz_long.py`` uses ``fuzz-long``: random seeds it chooses and prints,
generation only (no shrinking: a failure is recorded and the run goes on).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

__all__ = ["FUZZ_CI", "FUZZ_LONG"]

_QUIET = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]

settings.register_profile(
    "fuzz-ci", derandomize=True, database=None, deadline=None, suppress_health_check=_QUIET
)
settings.register_profile(
    "fuzz-long",
    database=None,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)

FUZZ_CI = settings.get_profile("fuzz-ci")
FUZZ_LONG = settings.get_profile("fuzz-long")
