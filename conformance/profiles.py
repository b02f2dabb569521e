"""Hypothesis profiles: how hard the suite looks, chosen with ``--hypothesis-profile``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # a case crosses processes: wall time is not the property under test
    # filter_too_much: examples drawn for an unclaimed capability are discarded
    # (judge.assume_claimed), and an adapter that claims little discards many.
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
}

PROFILES = {
    "quick": {"max_examples": 20, **_COMMON},
    # A merge gate must give one verdict per commit: ci draws the same examples on every run
    # (until the test's strategies, Hypothesis or Python change; each test's seed is its name,
    # conformance.plugin.draws). quick and thorough explore anew each run.
    "ci": {"max_examples": 60, "derandomize": True, **_COMMON},
    "thorough": {"max_examples": 500, **_COMMON},
}


def register() -> None:
    """Register the profiles and make ``quick`` the default: Hypothesis's own default deadline
    (200 ms) would fail any case that happens to start a world on a busy machine.
    ``--hypothesis-profile`` still chooses another."""
    for name, options in PROFILES.items():
        settings.register_profile(name, **options)
    settings.load_profile("quick")
    draw_from_the_seed_alone()


def draw_from_the_seed_alone() -> bool:
    """Keep Hypothesis from mixing the literals of "local" modules into its draws.

    Hypothesis (6.131 and later) now and then draws an integer or string literal that it read
    from the source of every imported module it takes to be the user's own: any module outside
    site-packages. In a checkout that is the suite itself, in an installed wheel nothing, in a
    user's repository whatever they imported; and the set grows as modules load. So one seed
    drew other examples from a checkout than from the wheel, and ci's one verdict per commit
    held only where the suite happened to lie. With that pool empty, a draw depends on the seed,
    the strategies and Hypothesis's release alone. Returns whether Hypothesis has such a pool
    (a release without one needs nothing)."""
    try:
        providers = importlib.import_module("hypothesis.internal.conjecture.providers")
    except ImportError:
        return False
    if not hasattr(providers, "_get_local_constants"):
        return False
    none = providers.Constants()
    providers._get_local_constants = lambda: none
    providers.CONSTANTS_CACHE.cache.clear()
    return True


def current_name() -> str:
    """The name of the loaded profile (Hypothesis renamed where it keeps it)."""
    named = getattr(settings, "get_current_profile_name", None)
    return named() if named else getattr(settings, "_current_profile", "default")


@contextmanager
def changed(test: Any, change: Callable[[settings], settings]) -> Iterator[None]:
    """Run the property ``test`` under ``change(its settings)``.

    Hypothesis reads a test's settings from an attribute its ``@given`` wrapper carries; where
    a Hypothesis release renames it, the property simply runs with its usual settings."""
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if not isinstance(current, settings):
        yield
        return
    test._hypothesis_internal_use_settings = change(current)
    try:
        yield
    finally:
        test._hypothesis_internal_use_settings = current
