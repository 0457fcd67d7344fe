"""Shared test configuration: Hypothesis profiles.

* ``ci`` (chosen when the environment variable ``CI`` is set): derandomised, so a CI run is
  reproducible, with the default number of examples and no per-example deadline.
* ``dev`` (default otherwise): random, no deadline.

``HYPOTHESIS_PROFILE=<name>`` picks a profile explicitly.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
