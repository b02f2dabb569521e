"""The example GPU workflow (``.github/workflows/gpu-conformance.example.yml``) works once copied
into another repository: its steps read nothing of this checkout, no ``${{ }}`` (so that CI can
run them as they are), and pin what the ci profile's draws depend on. ``.ci/run`` runs them on
Gloo with a wheel of this checkout (``.ci/workflow-steps``)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "gpu-conformance.example.yml"


def _reader():
    """``.ci/workflow-steps``, the reader CI runs the workflow with, as a module."""
    loader = importlib.machinery.SourceFileLoader(
        "workflow_steps", str(ROOT / ".ci" / "workflow-steps")
    )
    spec = importlib.util.spec_from_loader("workflow_steps", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _workflow_steps():
    return _reader().run_steps(WORKFLOW.read_text())


def test_the_steps_get_the_jobs_env_with_the_inputs_defaults():
    """CI runs the steps with this env, overriding only what a GPU-less machine must."""
    env = _reader().job_env(WORKFLOW.read_text())
    assert env == {
        "SHARDSPEC": None,  # required: the suite to install
        "IMPL": "torch",
        "PROFILE": "ci",
        "MIN_RULES": "100",
        "KNOWN_FAILURES": "",  # none of the user's own: the shipped ones alone
        "BACKEND": "nccl",
        "DEVICE": "",  # the backend's own device: cuda for nccl
        "WORLD_SIZES": "auto",  # a validated set (options.VALIDATED) the GPUs allow
    }


def test_the_example_workflows_steps_need_nothing_of_this_checkout():
    steps = _workflow_steps()
    assert [name for name, _ in steps] == [
        "Install shardspec beside the runner's PyTorch",
        "The conformance suite, one rank per GPU",
    ]
    script = "\n".join(text for _, text in steps)
    assert "${{" not in script
    for of_this_checkout in ("-e .", ".ci/", "constraints.txt"):
        assert of_this_checkout not in script
    assert '"$SHARDSPEC"' in script  # the suite comes from the input, not from `.`
    # torchrun on PATH may be the runner's own Python's; the suite starts its own ranks.
    assert not re.search(r"(^|\s)torchrun\s", script)


def test_the_example_workflow_keeps_the_runners_pytorch_and_the_ci_profiles_hypothesis():
    (_, install), *_ = _workflow_steps()
    assert "-c .shardspec-venv/keep-torch.txt" in install
    pinned = re.findall(r"hypothesis==[\w.]+", install)
    constraints = (ROOT / ".ci" / "constraints.txt").read_text()
    assert pinned == re.findall(r"^hypothesis==[\w.]+", constraints, re.MULTILINE)


def test_ci_runs_the_example_workflows_steps():
    ci = (ROOT / ".ci" / "run").read_text()
    assert '.ci/workflow-steps" "$checkout/.github/workflows/gpu-conformance.example.yml"' in ci
