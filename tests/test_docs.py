"""The pages a reader follows keep working: every command a page shows is parsed, found or run
here, every relative link resolves, and the README stays a page of quick starts that reaches
every other page in one click. A command that no check here knows fails until one is taught,
so a page cannot show a command that nothing checks."""

from __future__ import annotations

import configparser
import contextlib
import importlib
import importlib.metadata
import importlib.util
import io
import itertools
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Pages rendered by code from data (findings render, findings changes, matrix): their tests own
# them, and their quoted PyTorch messages hold text that reads as a link ("f32[](S(0))").
RENDERED = {"FINDINGS.md", "RELEASES.md", "MATRIX.md"}
PAGES = sorted(
    {
        README,
        *(p for p in (ROOT / "conformance").glob("*.md") if p.name not in RENDERED),
        ROOT / ".github" / "CONTRIBUTING.md",
        ROOT / "conformance" / "adapters" / "README.md",
        ROOT / "fixtures" / "README.md",
        *(ROOT / "spec").glob("*.md"),
    }
)
# The pages the README links to, one click away: each reader's own page and the references.
README_REACHES = [
    "conformance/RUNNING.md",
    "conformance/GATING.md",
    "conformance/KNOWN-FAILURES.md",
    "conformance/INTERNALS.md",
    ".github/CONTRIBUTING.md",
    "spec/README.md",
    "spec/tour.md",
    "conformance/adapters/README.md",
    "conformance/MATRIX.md",
    "conformance/FINDINGS.md",
]
README_MOST_LINES = 110

FENCE = re.compile(r"^[ \t]*```([\w-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
SHELL = {"sh", "bash", "shell"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --- what a page shows ---------------------------------------------------------------------


def blocks(text: str) -> Iterator[tuple[str, str]]:
    """Each fenced block of a page: its language and its body (code spans never hold fences)."""
    for match in FENCE.finditer(text):
        yield match.group(1), match.group(2)


def commands(text: str) -> list[str]:
    """Every command line of the page's shell blocks, and each ``$ `` line of its console
    blocks, continuation lines (``\\``) joined; comments are dropped when the line is split."""
    found = []
    for language, body in blocks(text):
        lines = body.splitlines()
        if language == "console":
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        elif language not in SHELL:
            continue
        joined = ""
        for line in lines:
            joined += line.strip()
            if joined.endswith("\\"):
                joined = joined[:-1] + " "
                continue
            if joined and not joined.startswith("#"):
                found.append(joined)
            joined = ""
    return found


def simple_commands(line: str) -> list[list[str]]:
    """A command line as its simple commands (split at ``&&``), each without its leading
    environment assignments (``PYTHONPATH=. .ci/gpu-figures``)."""
    words = shlex.split(line, comments=True)
    parts = [list(group) for sep, group in itertools.groupby(words, lambda w: w == "&&") if not sep]
    return [list(itertools.dropwhile(ENV_ASSIGNMENT.match, part)) for part in parts]


def links(text: str) -> list[str]:
    """The targets of the page's markdown links and images, code blocks left out."""
    prose = FENCE.sub("", text)
    prose = re.sub(r"`[^`]+`", "``", prose)  # a link shown as code is no link
    return [a or b for a, b in LINK.findall(prose)]


# --- the checks of each kind of command ----------------------------------------------------


def check_conformance(argv: list[str]) -> None:
    """Parsed by the CLI's own parser, as ``main`` splits it: what follows ``--`` is pytest's."""
    split = argv.index("--") if "--" in argv else len(argv)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv[:split])
    except SystemExit as exc:
        raise AssertionError(f"the CLI refuses it (exit {exc.code}): {err.getvalue()}") from None
    if split < len(argv):
        assert args.command == "run", "only 'run' passes arguments after -- on to pytest"


def check_reference_tool(module: str, argv: list[str]) -> None:
    """The reference's drawing tools print what the spec shows: each runs here, in-process."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = importlib.import_module(module).main(argv)
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:
        raise AssertionError(f"raised {exc!r}") from None
    assert not code, f"exit {code}: {err.getvalue()}"
    assert out.getvalue(), "printed nothing"


def check_pytest(argv: list[str], markers: set[str]) -> None:
    """A ``-m`` expression names markers the project declares (pyproject.toml)."""
    for flag, value in itertools.pairwise(argv):
        if flag == "-m":
            named = set(re.findall(r"[A-Za-z_]\w*", value)) - {"not", "and", "or"}
            assert named <= markers, f"undeclared markers {sorted(named - markers)}"


def check_module(argv: list[str], markers: set[str]) -> None:
    module, rest = argv[0], argv[1:]
    if module == "conformance":
        check_conformance(rest)
    elif module == "pytest":
        check_pytest(rest, markers)
    elif module == "pip":
        check_pip(rest)
    else:
        assert importlib.util.find_spec(module) is not None, f"no module {module}"
        if module.startswith("reference.") and hasattr(importlib.import_module(module), "main"):
            check_reference_tool(module, rest)


def extras_of(requirement: str) -> set[str]:
    """The extras ``pip install`` is asked for on this project: ``.[test]``, ``shardspec[x]``."""
    match = re.fullmatch(r"(?:\.|shardspec)\[([\w, -]+)\](?: @ .*)?", requirement)
    return {e.strip() for e in match.group(1).split(",")} if match else set()


def check_pip(argv: list[str]) -> None:
    assert argv[:1] == ["install"], "pip: only install is shown"
    known = set(importlib.metadata.metadata("shardspec").get_all("Provides-Extra") or [])
    for word in argv[1:]:
        asked = extras_of(word)
        assert asked <= known, f"pip extras {sorted(asked - known)} are not in pyproject.toml"


def tox_envs() -> set[str]:
    """The envs tox.ini defines, its factor sections (``torch{2.11,2.12}``) expanded."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    envs = {e.strip() for e in ini["tox"]["envlist"].split(",")}
    for section in ini.sections():
        if section.startswith("testenv:"):
            name = section.removeprefix("testenv:")
            parts = re.split(r"\{([^}]*)\}", name)
            choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
            envs |= {"".join(c) for c in itertools.product(*choices)}
    return envs


def check_tox(argv: list[str]) -> None:
    split = argv.index("--") if "--" in argv else len(argv)
    for flag, value in itertools.pairwise(argv[:split]):
        if flag == "-e":
            named = set(value.split(","))
            assert named <= tox_envs(), f"tox.ini defines no env {sorted(named - tox_envs())}"


def check_ci_script(path: str) -> None:
    script = ROOT / path
    assert path.startswith(".ci/"), f"not a script of .ci/: {path}"
    assert script.is_file(), f"no script {path}"
    assert os.access(script, os.X_OK), f"{path} is not executable"


def check_command(words: list[str], markers: set[str]) -> None:
    """One simple command; one that no branch here knows is a failure, to be taught."""
    program, args = words[0], words[1:]
    if program in ("python", "python3") and args[:1] == ["-m"]:
        check_module(args[1:], markers)
    elif program == "torchrun" and "-m" in args:  # its own options, then -m MODULE ARGS
        check_module(args[args.index("-m") + 1 :], markers)
    elif program == "pip":
        check_pip(args)
    elif program == "ruff":
        assert args[:1] in (["check"], ["format"]), "ruff: check or format"
    elif program == "tox":
        check_tox(args)
    elif program == "bash" and len(args) == 1:
        check_ci_script(args[0])
    elif program.startswith(".ci/"):
        check_ci_script(program)
    else:
        raise AssertionError("a kind of command tests/test_docs.py does not check: teach it")


def failures_of_commands(text: str, markers: set[str]) -> list[str]:
    failures = []
    for line in commands(text):
        for words in simple_commands(line):
            try:
                check_command(words, markers)
            except AssertionError as exc:
                failures.append(f"{line}\n    {' '.join(words)}: {exc}")
    return failures


# --- links ---------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, code marks and punctuation dropped, spaces
    as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: {resolved.name} has no heading #{anchor}")
    return broken


# --- the tests -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def markers(pytestconfig: pytest.Config) -> set[str]:
    return {line.split(":")[0].split("(")[0].strip() for line in pytestconfig.getini("markers")}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_command_a_page_shows_is_checked_and_holds(page, markers):
    """A command a reader copies either parses with the CLI, names envs, scripts, modules and
    extras that exist, or (a reference tool) runs; anything else is taught to this test first."""
    failures = failures_of_commands(page.read_text(), markers)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_of_a_page_resolves(page):
    """A file link goes to a file that exists, and an anchor into a page to one of its
    headings; web links are not fetched."""
    assert not broken_links(page), broken_links(page)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_code_block_names_its_language(page):
    """A block without a language would hold commands that no check here reads."""
    bare = [body.splitlines()[:1] for language, body in blocks(page.read_text()) if not language]
    assert bare == [], f"{page_id(page)}: blocks with no language, starting {bare}"


def test_the_readme_is_a_page_of_quick_starts():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines; move the rest to a page"


def test_the_readme_reaches_every_page_in_one_click():
    linked = {os.path.normpath(t.partition("#")[0]) for t in links(README.read_text())}
    assert sorted(set(README_REACHES) - linked) == []


def test_the_readme_shows_the_three_quick_starts_in_order():
    headings = re.findall(r"^## (.+)$", README.read_text(), re.M)
    starts = ["Check a PyTorch release", "Gate your build or your implementation", "Learn the spec"]
    assert [h for h in headings if h in starts] == starts


# --- the checks themselves catch what they are for -----------------------------------------


@pytest.mark.parametrize(
    ("line", "fault"),
    [
        ("python -m conformance run --profile nightly", "the CLI refuses it"),
        ("python -m conformance rules -- -k x", "only 'run'"),
        ("torchrun --standalone -m conformance run --world-sizes 9", "the CLI refuses it"),
        ("tox -e torch2.4,lint", "tox.ini defines no env ['torch2.4']"),
        ("bash .ci/no-such-script", "no script"),
        ("python -m conformance.no_such_module", "no module"),
        ("pip install -e '.[docs]'", "pip extras ['docs']"),
        ("python -m pytest -m slowest", "undeclared markers ['slowest']"),
        ("python -m reference.dtensor.draw --shape 5,3 --mesh 2,2 --placements X", "raised"),
        ("make docs", "does not check: teach it"),
    ],
)
def test_a_command_that_would_not_work_fails_the_check(line, fault, markers):
    failures = failures_of_commands(f"```sh\nruff check .  # fine\n{line}\n```\n", markers)
    assert [fault in failure for failure in failures] == [True], failures


def test_a_command_split_over_lines_and_joined_by_and_is_checked_whole(markers):
    page = "```sh\nPYTHONPATH=. .ci/run && python -m conformance \\\n    run --bogus\n```\n"
    failures = failures_of_commands(page, markers)
    assert ["conformance run --bogus" in failure for failure in failures] == [True], failures
    assert commands("```console\n$ python -m x\nprinted\n```\n") == ["python -m x"]


def test_a_link_to_a_missing_file_or_heading_is_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A `code` heading, too\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-too) [web](https://x.invalid/y) [self](#top)\n"
        "[gone](missing.md) [no heading](other.md#nowhere) `[code](missing.md)`\n"
        "# Top\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: other.md has no heading #nowhere",
    ]
