"""A pytest plugin for the mutation runs: the (derandomized) ``ci`` profile made fully
deterministic.

Hypothesis keeps looking for further bugs for up to ten seconds after the first one, so on a
busy machine a run can shrink towards a different (equally minimal) case; and the example
database would replay what earlier runs found. Neither may decide what a test pins."""

from __future__ import annotations

from hypothesis import settings

from conformance import profiles

settings.register_profile(
    "mutation",
    **profiles.PROFILES["ci"],
    report_multiple_bugs=False,
    database=None,
)
