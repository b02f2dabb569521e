"""A pytest plugin for the mutation runs: the (derandomized) ``ci`` profile made fully
deterministic, without (``mutation``) or with (``mutation-covering``) the ci profile's covering
examples (``conformance.pairwise``), which only the mutants of a pair of classes need.

Hypothesis keeps looking for further bugs for up to ten seconds after the first one, so on a
busy machine a run can shrink towards a different (equally minimal) case; and the example
database would replay what earlier runs found. Neither may decide what a test pins."""

from __future__ import annotations

from hypothesis import settings

from conformance import pairwise, profiles

settings.register_profile(
    "mutation",
    **profiles.PROFILES["ci"],
    report_multiple_bugs=False,
    database=None,
)
settings.register_profile(
    "mutation-covering",
    **profiles.PROFILES["ci"],
    report_multiple_bugs=False,
    database=None,
)
pairwise.POOL["mutation-covering"] = pairwise.POOL["ci"]
