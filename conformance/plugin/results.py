"""The run's results: every report that cites rules folded into the per-rule table and, for a
per-op test, the per-op table with the findings each op met; printed, written to
``--report-dir`` (rules.md, rules.json) and to a CI step summary; and the known failures this
run listed but never met."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conformance import cost_report, edge_report, known_failures, rules, run_info
from conformance import report as rule_report
from conformance.plugin.configure import BORROWED, XFAILS, header, world_sizes
from conformance.world import harness, stop


def _columns(properties: dict[str, str], verdict: str) -> list[str]:
    """The world sizes a test's verdict belongs to: its own parameter; for a property that draws
    its size, the size of the failing case if it failed, else every size it ran; ``any`` for a
    test that ran no case (a pure call in the driver, or a skip)."""
    if properties["world_size"] != "any":
        return [properties["world_size"]]
    failed_at = [n for n in properties.get("failed_at", "").split(",") if n]
    if failed_at and verdict in ("fail", "xfail"):
        return failed_at
    return [n for n in properties.get("sizes_ran", "").split(",") if n] or ["any"]


def _op_verdict(properties: dict[str, str], verdict: str) -> str:
    """An op's own verdict in a per-op test: a known failure of an entry scoped to the op is
    the op's (``xfail``); one of an entry naming every op (another behaviour, as a mesh whose
    ranks do not ascend) leaves the op's examples that ran past it to speak (``pass``), or none
    (``blocked``) where every example, or the strict xfail, ended at it."""
    own = bool(properties.get("own_known"))
    if verdict == "pass":
        return "xfail" if own else "pass"
    if verdict == "xfail":
        whole = properties.get("whole")
        return "xfail" if (whole == "own" if whole else own) else rule_report.BLOCKED
    return verdict


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the reports, once the options are checked (``configure``): the edge classes and
    costs each process counts, and, in the process that sees every report (the xdist
    controller, or a run without xdist), the tables that fold them."""
    config.stash[edge_report.MAX_RANKS] = max(world_sizes(config))
    config.pluginmanager.register(edge_report, "shardspec-edges")
    config.pluginmanager.register(cost_report, "shardspec-costs")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_RuleResults(config), "shardspec-rule-results")
        edge_results = edge_report.EdgeResults(
            config.getoption("--require-edges"), max(world_sizes(config))
        )
        config.pluginmanager.register(edge_results, "shardspec-edge-results")
        config.pluginmanager.register(cost_report.CostResults(), "shardspec-cost-results")


class _RuleResults:
    """Folds every test report that cites rules into the per-rule table, and prints it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.table = rule_report.RuleTable(backend=config.getoption("--backend"))
        self.ops = rule_report.RuleTable(backend=config.getoption("--backend"))
        self.op_findings: dict[str, dict[str, set[str]]] = {}  # op -> own/other -> record ids
        self.rule_findings: dict[str, set[str]] = {}  # rule -> record ids of known failures met
        self.known = {rule.id for rule in rules.load()}
        self.known_seen: dict[str, set[str]] = {}
        self.known_as: dict[str, dict[str, set[str]]] = {}  # test -> rule -> behaviours met
        self.whole: set[str] = set()  # tests a survey saw end at their first failure
        self.per_op: dict[str, str] = {}  # a per-op test's suite id -> its op
        self.collected = 0
        self.finished: set[str] = set()
        self.not_judged: list[str] = []
        self.session: pytest.Session | None = None
        self.interrupted = False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = max(self.collected, len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected = max(self.collected, len(ids))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A run that met a harness or environment error ends as an error, whatever else it
        judged (``conformance.world.harness``); so does a finished run that judged fewer rules
        than ``--min-rules`` (no test collected, every test skipped)."""
        judged, least = len(self.table.judged()), self.config.getoption("--min-rules")
        option = self.config.option
        ran_tests = not (option.collectonly or getattr(option, "showfixtures", False))
        finished = ran_tests and not self.incomplete()
        # Not 1: a run that failed judged something, or its tests reached methods the adapter
        # has not written ("not implemented"), which is the adapter's failure, not the harness's.
        if judged < least and finished and session.exitstatus in (0, 5):
            self.not_judged.append(
                f"too few rules judged: {judged}, where --min-rules asks for {least}"
            )
        if self.not_judged and session.exitstatus in (0, 1, 5):
            session.exitstatus = harness.EXIT_CODE

    def incomplete(self) -> str | None:
        """Why the table does not cover the whole run (interrupted, tests not run), if so."""
        not_run = self.collected - len(self.finished)
        if not self.interrupted and not_run <= 0:
            return None
        cause = "the run was interrupted" if self.interrupted else "the run stopped early"
        return f"INCOMPLETE: {cause}; {not_run} of {self.collected} tests did not run"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.finished.add(report.nodeid)
        if stop.REQUESTED.is_set():
            self.interrupted = True
            if self.session is not None:
                self.session.shouldstop = "interrupted"
        properties = dict(report.user_properties)
        final = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if "no_verdict" in properties and final:
            kind, _, why = properties["no_verdict"].partition(": ")
            self.not_judged.append(f"{kind}: {report.nodeid}: {why}")
        if "rules" not in properties or not final:
            return
        skipped = report.skipped and isinstance(report.longrepr, tuple)
        reason = report.longrepr[2].removeprefix("Skipped: ") if skipped else ""
        verdict = rule_report.verdict_of(report.outcome, hasattr(report, "wasxfail"), reason)
        if report.failed and str(report.longrepr).startswith("[XPASS(strict)]"):
            verdict = "xpass"  # a known failure that no longer fails: fixed, or never drawn
        if "no_verdict" in properties:
            verdict = rule_report.ERROR
        elif "not_implemented" in properties:
            verdict = rule_report.NOT_IMPLEMENTED
        violated = [r for r in properties.get("violated", "").split(",") if r in self.known]
        known = [r for r in properties.get("known", "").split(",") if r in self.known]
        key = properties.get("suite_id", report.nodeid)
        self.known_seen.setdefault(key, set()).update(known)
        if properties.get("whole"):
            self.whole.add(key)
        shown = self.known_as.setdefault(key, {})
        for part in filter(None, properties.get("known_as", "").split(";")):
            rule, _, behaviours = part.partition("=")
            shown.setdefault(rule, set()).update(behaviours.split("|"))
        for part in filter(None, properties.get("rule_findings", "").split(";")):
            rule, _, ids = part.partition("=")
            self.rule_findings.setdefault(rule, set()).update(ids.split("|"))
        if "op" in properties:
            self.per_op[key] = properties["op"]
            for whose in ("own", "other"):
                met = self.op_findings.setdefault(properties["op"], {}).setdefault(whose, set())
                met.update(filter(None, properties.get(f"findings_{whose}", "").split(",")))
        stopped_by = violated if verdict in ("fail", "xfail") else []
        rest = [r for r in properties["rules"].split(",") if r not in stopped_by + known]
        ended_early = stopped_by or (known and verdict == "xfail")
        for size in _columns(properties, verdict):
            if "op" in properties:
                self.ops.add([properties["op"]], size, _op_verdict(properties, verdict))
            self.table.add(stopped_by, size, verdict)
            self.table.add([r for r in known if r not in stopped_by], size, "xfail")
            self.table.add(rest, size, rule_report.BLOCKED if ended_early else verdict)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        self._report_unmet_known_failures(terminalreporter)
        for line in self.not_judged:
            terminalreporter.write_line(f"shardspec: {line}")
        incomplete = self.incomplete()
        if not self.table.cells and not incomplete:
            return
        order = [rule.id for rule in rules.load()]
        info = header(self.config)
        if incomplete:
            info = {"incomplete": incomplete, **info}
        terminalreporter.section("shardspec: results per rule")
        for line in run_info.render_lines(info):
            terminalreporter.write_line(line)
        terminalreporter.write_line("")
        terminalreporter.write_line(rule_report.render_text(self.table, order))
        markdown = (
            run_info.render_markdown(info) + "\n" + rule_report.render_markdown(self.table, order)
        )
        if self.ops.cells:
            terminalreporter.section("shardspec: results per op (spec/dt-ops.md)")
            terminalreporter.write_line(rule_report.render_text(self.ops, [], noun="op"))
            markdown += "\n### Per op\n\n" + rule_report.render_markdown(self.ops, [], noun="op")
        if incomplete:
            markdown = f"**{incomplete}.**\n\n{markdown}"
        directory = self.config.getoption("--report-dir")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            Path(directory, "rules.md").write_text(markdown)
            exit_code = int(self.session.exitstatus) if self.session is not None else None
            Path(directory, "rules.json").write_text(
                rule_report.render_json(
                    self.table,
                    order,
                    run=info,
                    exit_code=exit_code,
                    ops=self.ops,
                    op_findings=self.op_findings,
                    rule_findings=self.rule_findings,
                    behaviours=self.known_as if self.config.getoption("--survey") else None,
                    whole=self.whole,
                    per_op=self.per_op,
                )
            )
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a") as out:
                out.write("## shardspec conformance\n\n" + markdown)

    def _report_unmet_known_failures(self, terminalreporter) -> None:
        """Rule entries of the xfails file that no test of this run met, and behaviours listed
        for a met rule that none of its failures showed: the rule may be fixed (or fixed in
        part), or the run did not draw a case that shows it. A ci run is deterministic, so
        these lines say which symptoms a release's run really confirms."""
        unmet_entries = 0
        for entry in self.config.stash[XFAILS]:
            if entry.whole:
                continue  # a strict xfail: a test that no longer fails says so itself (XPASS)
            ran = [n for n in self.known_seen if known_failures.matches(entry, n)]
            met = set().union(*(self.known_seen[n] for n in ran))
            for rule in (r for r in entry.rules if r in met):
                shown = set().union(*(self.known_as.get(n, {}).get(rule, set()) for n in ran))
                never = sorted(str(b) for b in entry.symptoms[rule] if str(b) not in shown)
                if never:
                    terminalreporter.write_line(
                        f"{entry.where}: known failure of {rule} in {entry.test_id} met, "
                        f"but never as: {', '.join(never)}"
                    )
            unmet = [r for r in entry.rules if r not in met]
            if ran and unmet:
                unmet_entries += 1
                terminalreporter.write_line(
                    f"{entry.where}: known failure of {' '.join(unmet)} in "
                    f"{entry.test_id} not met in this run"
                )
        for path in self.config.stash[BORROWED]:
            counts = self.table.counts()
            terminalreporter.write_line(
                f"{path} is another release's known failures (see the header). Against it this "
                f"release has {counts.get('fail', 0)} failing rules, "
                f"{counts.get('xpass', 0)} unexpected passes and {unmet_entries} rule entries "
                "not met: what this release changed, or what this run did not draw."
            )
