"""What travels between the driver and the ranks: a case out, one outcome per rank back.

A case is plain data (a task name and JSON-able arguments), so the same case can be drawn by
Hypothesis, sent to ranks, printed as a replay command, or saved as a fixture. Every rank answers
every case with exactly one outcome; faults (a hang, a dead process) are outcomes too, so the
driver can judge the symmetry of errors as well as the values.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conformance.world.backends import Backend

# A rank's outcome when the case reached adapter methods not written yet: the exception's class
# name, and its message before the methods' names (``rank.execute``).
UNIMPLEMENTED = "NotImplementedInAdapter"
UNIMPLEMENTED_SAYS = "not implemented in the adapter: "
# The package of the suite's own tasks: the only code a replay runs unless told otherwise.
SUITE_TASKS = "conformance.tasks"
RULE_ID = re.compile(r"\b([A-Z]+(?:-[A-Z]+)*-\d+)\b")


@dataclass(frozen=True)
class Case:
    """One unit of work that every rank of a world runs: ``task(ctx, **args)``.

    ``task`` names a module-level function as ``"package.module:function"``; ranks import it by
    that name, so a case survives being written out and read back.
    """

    task: str
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.task, str) or ":" not in self.task:
            raise TypeError(f"Case.task must be 'module:function'; got task={self.task!r}")
        try:
            json.dumps(self.args)
        except TypeError as exc:
            raise TypeError(
                f"Case.args must be JSON-able plain data so the case can be replayed; {exc}"
            ) from None

    def to_json(self) -> str:
        return json.dumps({"task": self.task, "args": self.args}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Case:
        """The case a replay line carries; ``ValueError`` for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("task"), str):
            raise ValueError('expected {"task": "module:function", "args": {...}}')
        args = data.get("args", {})
        if not isinstance(args, dict):
            raise ValueError(f"args must be an object; got {type(args).__name__}")
        return cls(task=data["task"], args=args)

    def replay_command(self, world_size: int, backend: Backend, after: Sequence[Case] = ()) -> str:
        """A one-line shell command that runs this case again on a fresh world, after the cases
        ``after`` on that world, in order. A case is data: the implementation it ran
        (``args.impl``) is an option of the command, never part of the JSON, and a task outside
        the suite's own needs its module named to run."""
        cases = [*after, self]
        options = f"{backend.options} --world-size {world_size}"
        if "impl" in self.args:
            options += f" --impl {shlex.quote(str(self.args['impl']))}"
        for module in dict.fromkeys(case.task.partition(":")[0] for case in cases):
            if not module.startswith(SUITE_TASKS + "."):
                options += f" --task-module {shlex.quote(module)}"
        data = [Case(c.task, {k: v for k, v in c.args.items() if k != "impl"}) for c in cases]
        return f"python -m conformance replay {options} " + " ".join(
            shlex.quote(d.to_json()) for d in data
        )


FACTS_ATTRIBUTE = "shardspec_facts"
# The fact a task attaches when the tensor a case operates on could not be built (its
# constructor raised), so the driver blames the constructor, not the operation under test.
BUILT_FACT = "built"


@dataclass(frozen=True)
class Returned:
    """The rank finished the task; ``value`` is what it returned (tensors moved to CPU)."""

    rank: int
    value: Any

    def describe(self) -> str:
        return f"rank {self.rank}: returned {_short(self.value)}"


@dataclass(frozen=True)
class Raised:
    """The task raised on this rank. ``types`` is the exception's MRO, most derived first;
    ``facts`` is what the task saw around the raise, for the driver to judge (a task attaches
    them to the exception it lets through as ``FACTS_ATTRIBUTE``)."""

    rank: int
    types: tuple[str, ...]
    message: str
    traceback: str
    facts: dict[str, Any] | None = None

    @property
    def type(self) -> str:
        return self.types[0]

    @property
    def rule(self) -> str | None:
        """The first spec rule id the message names, if any."""
        match = RULE_ID.search(self.message)
        return match.group(1) if match else None

    def is_a(self, name: str) -> bool:
        """Whether the exception is an instance of the class called ``name`` (by MRO)."""
        return name in self.types

    def describe(self) -> str:
        return f"rank {self.rank}: raised {self.type}: {self.message}"


@dataclass(frozen=True)
class Hung:
    """The rank gave no answer in time, or had fallen ``asleep`` (blocked with no work left, while
    every rank still out was asleep too: ``conformance.world.idle``); ``stack`` is its Python stack
    when it was stopped."""

    rank: int
    waited_s: float
    stack: str
    asleep: bool = False

    def describe(self) -> str:
        how = "asleep, " if self.asleep else ""
        return f"rank {self.rank}: no answer after {self.waited_s:.1f} s ({how}hung)"


@dataclass(frozen=True)
class Died:
    """The rank's process ended during the case; ``exitcode`` is negative for a signal."""

    rank: int
    exitcode: int | None
    log_tail: str

    def describe(self) -> str:
        return f"rank {self.rank}: process died with exit code {self.exitcode}"


Outcome = Returned | Raised | Hung | Died


class CaseFailed(AssertionError):
    """A case did not end with every rank returning; the message shows every rank's outcome."""


@dataclass(frozen=True)
class CaseResult:
    """The outcomes of one case, indexed by rank, with what is needed to replay it."""

    case: Case
    outcomes: tuple[Outcome, ...]
    world_size: int
    backend: Backend
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return all(isinstance(o, Returned) for o in self.outcomes)

    @property
    def faulted(self) -> bool:
        """Whether a rank hung or died: the world that ran the case is gone."""
        return any(isinstance(o, Hung | Died) for o in self.outcomes)

    def values(self) -> list[Any]:
        """Every rank's return value, or :class:`CaseFailed` describing what went wrong."""
        if not self.ok:
            raise CaseFailed(self.report("not every rank returned"))
        return [o.value for o in self.outcomes]  # type: ignore[union-attr]

    def replay_command(self, after: Sequence[Case] = ()) -> str:
        return self.case.replay_command(self.world_size, self.backend, after)

    def unimplemented(self) -> list[str]:
        """The adapter methods that ranks reached unwritten (``conformance.world.unimplemented``),
        in rank order, once each."""
        methods = [
            method
            for o in self.outcomes
            if isinstance(o, Raised) and o.is_a(UNIMPLEMENTED)
            for method in o.message.removeprefix(UNIMPLEMENTED_SAYS).split(", ")
        ]
        return list(dict.fromkeys(methods))

    def report(self, headline: str) -> str:
        """A failure report a reader can act on: the case, each rank's outcome, the replay."""
        lines = [
            f"{headline} [{self.case.task} on {self.world_size} rank(s), {self.backend.name}]",
            f"  case: {self.case.to_json()}",
        ]
        lines += [f"  {o.describe()}" for o in self.outcomes]
        for o in self.outcomes:
            detail = {Raised: "traceback", Hung: "stack", Died: "log_tail"}.get(type(o))
            text = getattr(o, detail, "") if detail else ""
            if text.strip():
                lines.append(f"  --- rank {o.rank} {detail} ---")
                lines += [f"  | {line}" for line in text.rstrip().splitlines()[-40:]]
        lines.append(f"  replay: {self.replay_command()}")
        return "\n".join(lines)


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
