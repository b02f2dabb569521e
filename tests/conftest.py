"""The project's own tests run as a merge gate: their Hypothesis examples are the same on every
run (``quick``, derandomized), so a commit gets one verdict. ``conformance run`` keeps exploring
anew each time, and ``--hypothesis-profile`` still picks another profile here."""

from hypothesis import settings

from conformance import profiles

pytest_plugins = ["conformance.plugin", "pytester"]

settings.register_profile("selftest", **profiles.PROFILES["quick"], derandomize=True)
settings.load_profile("selftest")
