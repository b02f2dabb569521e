"""The pytest plugin, one module a step of a case's path from draw to verdict to report. Load it
with ``-p conformance.plugin`` (``python -m conformance run`` does).

- ``configure``: the options, and the checks that refuse a run before its first test;
- ``collect``: a test per world size and per op, each labelled with its rules;
- ``worlds``: the rank worlds and the sandbox, as fixtures;
- ``known``: known failures put on the tests they name, and which of them a test met;
- ``draws``: how each property draws (its seed, its number of examples);
- ``verdicts``: what a test's end means for the rules it cites;
- ``results``: the per-rule and per-op tables, printed and written.

Each imports only the steps before it.
"""

from conformance import profiles

profiles.register()  # before Hypothesis's own plugin reads --hypothesis-profile

pytest_plugins = [
    "conformance.plugin.configure",
    "conformance.plugin.collect",
    "conformance.plugin.worlds",
    "conformance.plugin.known",
    "conformance.plugin.draws",
    "conformance.plugin.verdicts",
    "conformance.plugin.results",
]
