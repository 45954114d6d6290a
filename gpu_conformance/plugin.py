"""The pytest plugin: `pytest --cluster[=TARGET]` runs tests_conformance/ against a cluster.

Every check is one test item whose id carries the check id. A check fails where it is a node's root
cause, is skipped as "blocked by <layer>: <reason>" where an earlier layer already broke, and passes
otherwise. Reports are written when the session ends.

With `--cluster` the session is one plugin object (ConformanceSession, registered as PLUGIN_NAME from
pytest_configure to pytest_unconfigure) holding the settings, the run, its result and the report paths;
the pytest-html and allure integration lives in pytest_reporting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpu_conformance import heap, pytest_reporting
from gpu_conformance.closed_stdout import GuardedStream, guard_terminal
from gpu_conformance.control_chars import printable
from gpu_conformance.errors import (
    EXIT_INTERNAL,
    EXIT_OUTPUT,
    ConformanceError,
    InternalError,
    OutputError,
    UsageError,
    internal_error,
)
from gpu_conformance.model import LAYER_ORDER, Layer, Status
from gpu_conformance.settings import Settings, load_config_file
from gpu_conformance.signals import install_sigterm, restore_sigterm, signals_deferred
from gpu_conformance.verdict import NOT_CONFORMANT

if TYPE_CHECKING:
    from gpu_conformance.run_result import RunResult
    from gpu_conformance.session import ConformanceRun
from gpu_conformance.targets import (
    DEFAULT_TARGET,
    TARGETS,
    cluster_help,
    how_to_run,
    options_from,
    target_option_specs,
)

CONFORMANCE_MARK = "conformance"
HOW_TO_RUN = how_to_run()

# The name the session object is registered under (pytest-html's and xdist's pattern): other plugins and tests
# reach it with config.pluginmanager.get_plugin(PLUGIN_NAME), or session_of(config).
PLUGIN_NAME = "gpu_conformance_session"


def session_of(config: pytest.Config) -> ConformanceSession | None:
    """The `--cluster` session's plugin object; None without --cluster (and after pytest_unconfigure)."""
    return config.pluginmanager.get_plugin(PLUGIN_NAME)


# option name -> Settings field
OPTIONS = {
    "kubeconfig": "kubeconfig", "context": "context", "operator_namespace": "operator_namespace",
    "gpu_node_selector": "gpu_node_selector", "expect_driver": "expect_driver", "expect_cdi": "expect_cdi",
    "probe_image": "probe_image", "probe_timeout": "probe_timeout", "no_probe": "no_probe",
    "report_dir": "report_dir", "baseline": "baseline", "probe_nodes": "probe_nodes",
    "probe_namespace": "probe_namespace",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gpu-conformance", "GPU Operator conformance")
    g.addoption("--cluster", nargs="?", const=DEFAULT_TARGET, default=None, metavar="TARGET", help=cluster_help())
    g.addoption("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
                                                    "in-cluster)")
    g.addoption("--context", default=None, help="kubeconfig context (default: current-context)")
    g.addoption("--operator-namespace", default=None,
                help="GPU Operator namespace (default: discovered from the app=gpu-operator pod)")
    g.addoption("--gpu-node-selector", default=None, help="label selector limiting which GPU nodes are judged")
    g.addoption("--expect-driver", default=None, help="auto|operator|host (default auto)")
    g.addoption("--expect-cdi", default=None, help="auto|yes|no (default auto: as the ClusterPolicy says)")
    g.addoption("--probe-image", default=None, help="image of the probe pod (needs nvidia-smi via the driver)")
    g.addoption("--probe-timeout", default=None, help="seconds to wait for the probe (default 300)")
    g.addoption("--probe-nodes", default=None,
                help="which GPU nodes that passed the earlier layers get a probe pod: all (default), a number "
                     "(random sample), or a label selector")
    g.addoption("--probe-namespace", default=None,
                help="existing namespace for the probe pods (rbac.yaml's least-privilege mode; default: "
                     "gpu-conformance-probe if it exists, else a namespace of the run's own)")
    g.addoption("--no-probe", action="store_true", default=None, help="strictly read-only: create no probe pod")
    g.addoption("--report-dir", default=None, help="where reports go (default reports/)")
    g.addoption("--conformance-config", default=None, help="YAML file with the options above; the command "
                                                           "line wins")
    g.addoption("--baseline", default=None, help="a previous conformance.json to compare this run with")
    # Each target's own options, from its options dataclass: --sim-profile, --sim-gpu-nodes, ...
    for target, spec in target_option_specs():
        spec.add_to(g.addoption, f"{target.name}-")


def settings_from_config(config: pytest.Config) -> Settings:
    values: dict[str, Any] = {}
    cfg_file = config.getoption("conformance_config")
    if cfg_file:
        values.update(load_config_file(cfg_file))
    for opt, fld in OPTIONS.items():
        v = config.getoption(opt)
        if v is not None:
            values[fld] = v
    return Settings(**values).validate()


def target_options_from_config(config: pytest.Config, target: str) -> Any:
    """The options dataclass of `--cluster=target`, filled from its `--<target>-*` options."""
    return options_from(TARGETS[target].options_type, config.getoption, f"{target}-")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{CONFORMANCE_MARK}: a conformance check (needs --cluster)")
    for layer in LAYER_ORDER:
        config.addinivalue_line("markers", f"{layer}: conformance layer {layer}")
    target = config.getoption("cluster")
    if target is None:
        return
    if target not in TARGETS:
        if os.path.exists(target):
            raise pytest.UsageError(f"--cluster took {target!r} as its target; write --cluster=current "
                                    f"(or put test paths before --cluster)")
        raise _usage_error(config, f"--cluster: unknown target {target!r} (known: {', '.join(TARGETS)})")
    if parallel_workers(config):
        # Under pytest-xdist every worker would start the target, read the cluster, create its own probe pods (GPUs
        # taken twice, each run seeing the other's as in progress) and write the same report files.
        raise _usage_error(config, "--cluster runs the checks once, in one process: leave out -n/--dist "
                                   "(pytest-xdist's parallel workers are for the suite's own tests)")
    try:
        settings = settings_from_config(config)
    except UsageError as e:
        raise _usage_error(config, str(e)) from None
    session = ConformanceSession(config, target, settings, target_options_from_config(config, target))
    config.pluginmanager.register(session, PLUGIN_NAME)
    # The last cleanup of the session (tryfirst: registered before the other plugins'): what the run froze
    # (heap.py) stays out of the full collections pytest forces at exit, and goes back to the collector after them.
    config.add_cleanup(heap.release)
    # SIGTERM (CI cancellation, `timeout`, a deleted Job) ends the run like Ctrl-C: cleanup and reports.
    install_sigterm()
    # tryfirst: before junitxml's, pytest-html's and allure's configure read their output options.
    pytest_reporting.default_report_paths(config, Path(settings.report_dir))


def parallel_workers(config: pytest.Config) -> bool:
    """Whether pytest-xdist is to run this session in workers (its own test: a distribution mode and hosts)."""
    return config.getoption("dist", "no") not in ("no", None) and bool(config.getoption("tx", None))


def pytest_unconfigure(config: pytest.Config) -> None:
    session = session_of(config)
    if session is not None:
        config.pluginmanager.unregister(session, PLUGIN_NAME)
        session.run = session.result = None
    restore_sigterm()


def _usage_error(config: pytest.Config, message: str) -> pytest.UsageError:
    """A bad option ends the run before pytest writes any report: leave reports that say so (issue: a stale
    CONFORMANT conformance.json in the report dir would otherwise pass for this run's)."""
    from gpu_conformance.errors import EXIT_USAGE
    from gpu_conformance.session import new_run_id

    report_dir = Path(config.getoption("report_dir") or Settings.report_dir)
    junit = getattr(config.option, "xmlpath", None) or report_dir / "junit.xml"
    with contextlib.suppress(OSError):  # the report dir itself may be what is wrong; the one line says it all
        _write_failed_run(report_dir, new_run_id(), EXIT_USAGE, message, junit)
    return pytest.UsageError(message)


def _output_error(e: OSError, where: str) -> OutputError:
    """One line for a report that could not be written (ENOSPC, a vanished or read-only directory, EPIPE)."""
    name = f" ({e.filename})" if getattr(e, "filename", None) else ""
    return OutputError(f"cannot write {where}{name}: {e.strerror or e}")


def _save_traceback(report_dir: Path, text: str) -> Path | None:
    """The traceback of an internal error, for a bug report; kept out of the terminal and the reports."""
    from gpu_conformance.report.redact import redact_text

    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        path = report_dir / "internal-error.txt"
        path.write_text(redact_text(text), encoding="utf-8")
        return path
    except OSError:
        return None


def _write_failed_run(report_dir: Path | str, run_id: str, exit_code: int, message: str,
                      junit: Path | str | None) -> dict[str, Path]:
    from gpu_conformance.report.failed_run import write_failed_run

    return write_failed_run(report_dir, run_id=run_id, exit_code=exit_code, message=message, junit_path=junit)


def _is_conformance(item: pytest.Item) -> bool:
    return item.get_closest_marker(CONFORMANCE_MARK) is not None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if session_of(config) is not None:
        return  # ConformanceSession.pytest_collection_modifyitems selects the items
    skip = pytest.mark.skip(reason=HOW_TO_RUN)
    for item in items:
        if _is_conformance(item):
            item.add_marker(skip)


class ConformanceSession:
    """One `pytest --cluster` session, registered as a plugin under PLUGIN_NAME while pytest is configured.

    It holds what the session has (settings, the run, its result and report paths, what ended it) and the
    hooks that need them, so there is no state on the config, in its stash or in module globals.
    """

    def __init__(self, config: pytest.Config, target: str, settings: Settings, target_options: Any = None) -> None:
        self.config = config
        self.target = target
        self.target_options = target_options
        self.settings = settings
        self.run: ConformanceRun | None = None
        # What ended the session before any test ran (one line, its exit code).
        self.error: ConformanceError | None = None
        # The probe lost the cluster after the read: the run still reports, then exits with this error's code.
        self.probe_error: ConformanceError | None = None
        # An exception pytest reported as INTERNALERROR (in a hook, ours or another plugin's): no verdict.
        self.internal: InternalError | None = None
        self.result: RunResult | None = None
        self.reports: dict[str, Path] = {}
        # The terminal's stream, guarded against a reader that goes away (closed_stdout.py).
        self.stdout: GuardedStream | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.stdout = guard_terminal(self._terminal())

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        # Paths given on the command line are the user's choice; otherwise only the conformance modules run.
        if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
            return
        keep = [i for i in items if _is_conformance(i)]
        dropped = [i for i in items if not _is_conformance(i)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """Read the cluster once, before the first check, so bad input ends the run with one line."""
        if self.config.option.collectonly:
            return None
        items = [i for i in session.items if _is_conformance(i)]
        if not items:
            return None
        from gpu_conformance.session import ConformanceRun

        run = ConformanceRun(self.settings, self.target, self.target_options)
        run.layers_selected = [layer for layer in LAYER_ORDER
                               if any(i.get_closest_marker(str(layer)) for i in items)]
        self.run = run
        try:
            run.start()
        except (ConformanceError, Exception) as e:
            run.close()
            err = e if isinstance(e, ConformanceError) else internal_error(e, "while reading the cluster")
            self.run, self.error = None, err
            self._say("", f"gpu-conformance: {err}", red=True, bold=True)
            return True  # run no test; pytest_sessionfinish sets the exit code
        install_sigterm()  # again: booting the simulated cluster installs a handler of its own
        if Layer.PROBE in run.layers_selected:
            self._probe(run)
        return None

    def _probe(self, run: ConformanceRun) -> None:
        """The probe runs once, before the tests that report it. Losing the cluster is one line and exit code 3;
        the tests still run and report INCOMPLETE (so every report says what happened)."""
        if not run.settings.no_probe and self._terminal() is not None:
            self._say("", "gpu-conformance: probing the GPU nodes that passed the earlier layers ...")
        try:
            run.run_probe()
        except (ConformanceError, Exception) as e:
            # Whatever ended the probe, its layer cannot pass: the probe's observations say aborted (INCOMPLETE).
            if not isinstance(e, ConformanceError):
                e = internal_error(e, "in the probe")
            if run.probe_run is not None and not run.probe_run.aborted:
                run.probe_run.aborted = str(e)
                run.forget_verdict()
            self.probe_error = e
            self._say(f"gpu-conformance: {e}" + (f" ({run.probe_cleanup})" if run.probe_cleanup and
                                                 run.probe_cleanup not in str(e) else ""), red=True, bold=True)

    def _terminal(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def _say(self, *lines: str, **markup: bool) -> None:
        """Lines for the terminal (stderr when pytest runs without its terminal reporter, e.g. -p no:terminal)."""
        tr = self._terminal()
        if self.stdout is not None and self.stdout.gone:
            tr = None  # the terminal went away: stderr may still reach a person (or a log)
        for line in lines:
            try:
                if tr is not None:
                    tr.write_line(line, **(markup if line else {}))
                elif line:
                    print(line, file=sys.stderr)
            except (OSError, ValueError):
                # The terminal is gone (`| head` exited, a closed ssh session): the reports still say it all.
                with contextlib.suppress(OSError, ValueError):
                    print(line, file=sys.stderr)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        outcome = yield
        pytest_reporting.add_html_evidence(item, outcome.get_result())

    def pytest_internalerror(self, excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
        """An exception in a hook: one line (the traceback goes to a file in the report dir), and the session
        ends with exit 7 and reports that say ERROR, never the green of the layers read before it."""
        self.internal = internal_error(excinfo.value, "during the run")
        where = _save_traceback(Path(self.settings.report_dir), str(excrepr))
        self._say(f"gpu-conformance: {self.internal}" + (f" (traceback: {where})" if where else ""),
                  red=True, bold=True)
        return True  # pytest prints no INTERNALERROR traceback

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
        """Reports and the exit code, after every other plugin's sessionfinish (junitxml wrote junit.xml: a
        failed run replaces it). A wrapper, so that another writer's failure (junit.xml on a full disk) is one
        line and exit 8 rather than a traceback, and this run's own reports are still attempted."""
        # A signal while reports are written (SIGTERM from CI's timeout, a second Ctrl-C) waits until they are
        # complete: it gave a traceback and exit 1, or no conformance.json. The run then exits 2 (interrupted).
        with signals_deferred() as received:
            others: OutputError | None = None
            try:
                yield
            except OSError as e:
                others = _output_error(e, "a report")
            self._write_reports(session, exitstatus, others)
        if received and session.exitstatus not in (EXIT_OUTPUT, EXIT_INTERNAL):
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            names = ", ".join(sorted({signal.Signals(n).name for n in received}))
            self._say(f"gpu-conformance: {names} while the reports were written: they were completed first",
                      red=True, bold=True)

    def _write_reports(self, session: pytest.Session, exitstatus: int, others: OutputError | None) -> None:
        try:
            self._finish(session, exitstatus)
        except OSError as e:
            self._fail_output(session, _output_error(e, str(self.settings.report_dir)))
        except Exception as e:
            self.internal = internal_error(e, "while writing the reports")
            self._say(f"gpu-conformance: {self.internal}", red=True, bold=True)
            try:
                self._finish(session, exitstatus)
            except OSError as e2:
                self._fail_output(session, _output_error(e2, str(self.settings.report_dir)))
        if others is not None and session.exitstatus != EXIT_OUTPUT:
            self._fail_output(session, others)
        if self.stdout is not None and self.stdout.gone and session.exitstatus != EXIT_OUTPUT:
            where = self.reports.get("json") or self.settings.report_dir
            self._fail_output(session, OutputError(f"standard output was closed before the run ended; the "
                                                   f"reports are written ({where})"))

    def _fail_output(self, session: pytest.Session, e: OutputError) -> None:
        """The reports cannot be written: one line, exit 8; the run's own cleanup has run already."""
        session.exitstatus = e.exit_code
        self.result = None
        self._say(f"gpu-conformance: {e}", red=True, bold=True)

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        settings, error, run = self.settings, self.error or self.internal, self.run
        if error is not None:
            if run is not None:
                run.close()
            session.exitstatus = error.exit_code
            # After pytest's junitxml (this hook runs last): its empty green suite is replaced by the error.
            self.reports = _write_failed_run(
                settings.report_dir, settings.run_id, error.exit_code, str(error), self.config.option.xmlpath)
            return
        if run is None:
            return
        try:
            if run.snapshot is not None:
                # One result for every report and the terminal summary: built and redacted once.
                self.result = run.result()
                self.reports = run.write_reports(self.result)
            else:
                # Interrupted (Ctrl-C) before the cluster was read: no verdict, and none of an earlier run either.
                self.reports = _write_failed_run(
                    settings.report_dir, settings.run_id, int(exitstatus),
                    "interrupted before the cluster was read", self.config.option.xmlpath)
        finally:
            run.close()
            # What is left (the result, the snapshot) lives until the session ends: out of the collector's walks.
            heap.settle()
        if self.probe_error is not None:
            # The cluster was lost mid-probe: the reports say INCOMPLETE and why; the exit code says "unreachable".
            session.exitstatus = self.probe_error.exit_code
        elif (self.result is not None and self.result.verdict.overall == NOT_CONFORMANT
              and session.exitstatus == pytest.ExitCode.OK):
            # The exit code agrees with the verdict, also when the failing layer's tests were not selected (-m probe).
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        result = self.result
        if result is None:
            return
        from gpu_conformance.report.redact import redact_text
        from gpu_conformance.report.terminal import summary_lines

        terminalreporter.section("GPU Operator conformance")
        for line in summary_lines(result, self.reports):
            terminalreporter.write_line(line)
        for line, warn in probe_lines(result.probe):
            terminalreporter.write_line(redact_text(line), yellow=warn)
        baseline = self.settings.baseline
        if baseline:
            from gpu_conformance.report.diff import diff_runs, format_diff
            from gpu_conformance.report.json_report import result_dict
            from gpu_conformance.report_format import load_json

            try:
                old = load_json(baseline)
                terminalreporter.write_line(f"changes since {baseline}:")
                terminalreporter.write_line(printable(format_diff(diff_runs(old, result_dict(result)))))
            except (OSError, ValueError) as e:
                terminalreporter.write_line(f"baseline {baseline} unreadable: {e}", red=True)


@pytest.fixture(scope="session")
def conformance(request: pytest.FixtureRequest):
    session = session_of(request.config)
    run = session.run if session is not None else None
    if run is None:
        pytest.skip(HOW_TO_RUN)
    return CheckAsserter(run)


class CheckAsserter:
    """What a test in tests_conformance/ calls: turn a check's outcome into pass / fail / skip."""

    def __init__(self, run) -> None:
        self.run = run

    def check(self, check_id: str, request: pytest.FixtureRequest | None = None) -> None:
        from gpu_conformance.run_result import compact_findings

        outcome = self.run.outcome(check_id)
        c = outcome.check
        # Grouped like conformance.json: per-node pass lines of 1,000 nodes made pytest.html 30 MB.
        evidence = compact_findings(outcome.findings)
        pytest_reporting.attach_evidence(request, c, outcome, evidence)
        if outcome.status == Status.FAIL:
            lines = [f"{c.id} {c.title}: FAILED"]
            for f in outcome.findings:
                if f.status == Status.FAIL and (f.node in outcome.failing_nodes or
                                                (f.node is None and "<cluster>" in outcome.failing_nodes)):
                    where = f.node or "cluster"
                    lines.append(f"  [{where}] {f.message}")
            first = next((f for f in outcome.findings if f.status == Status.FAIL), None)
            if first:
                lines.append(f"  hint: {first.hint}")
                lines.append(f"  see:  {first.kubectl}")
            if outcome.blocked_nodes:
                lines.append(f"  (also failing on {len(outcome.blocked_nodes)} node(s) blocked by earlier layers)")
            # Messages quote container logs and ClusterPolicy conditions: each stays on its own line, and no
            # escape sequence reaches the terminal (a log could clear the screen and print a fake verdict).
            pytest.fail("\n".join(printable(line, keep_newlines=False) for line in lines), pytrace=False)
        if outcome.status == Status.BLOCKED:
            pytest.skip(printable(f"{c.id}: {outcome.reason}", keep_newlines=False))
        if outcome.status == Status.NA:
            pytest.skip(printable(f"{c.id}: not applicable: {outcome.reason}", keep_newlines=False))
        if outcome.status == Status.WARN:
            warns = [f"[{f.node or 'cluster'}] {f.message}" for f in outcome.findings if f.status == Status.WARN]
            import warnings

            warnings.warn(printable(f"{c.id}: " + "; ".join(warns[:5]), keep_newlines=False), ConformanceWarning,
                          stacklevel=2)


class ConformanceWarning(UserWarning):
    """Something a person should know that does not break GPU access (opt-outs, transient upgrades)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that declares `LAYER = Layer.X` gets one test per check of that layer (check_id parameter)."""
    layer = getattr(metafunc.module, "LAYER", None)
    if layer is not None and "check_id" in metafunc.fixturenames:
        metafunc.parametrize("check_id", layer_params(Layer(layer)))


def layer_params(layer: Layer) -> list[Any]:
    """Parameters for a layer's test function: one per check id, marked with the layer."""
    from gpu_conformance import catalogue

    return [pytest.param(c.id, id=c.id, marks=[getattr(pytest.mark, str(layer)),
                                                getattr(pytest.mark, CONFORMANCE_MARK)])
            for c in catalogue.checks_for(layer)]


def probe_lines(probe: dict[str, Any]) -> list[tuple[str, bool]]:
    """How the probe ended and what earlier runs left behind: (line, is_warning). Its scope is on the verdict line."""
    out: list[tuple[str, bool]] = []
    if probe.get("aborted"):
        out.append((f"gpu-conformance: probe {probe['aborted']}; report written as INCOMPLETE", True))
    elif probe.get("cleanup_error"):
        out.append((f"warning: probe objects not deleted: {probe['cleanup_error']}", True))
    left = probe.get("leftovers") or []
    if left:
        out.append((f"warning: {len(left)} probe object(s) left by earlier runs: {_first_five(left)} "
                    "(delete them with `gpu-conformance probe cleanup`)", True))
    runs = probe.get("other_runs") or []
    if runs:
        # A concurrent run is not a mess to clean up: said for information, and `probe cleanup` spares it.
        out.append((f"note: {len(runs)} other probe run(s) in progress: {_first_five(runs)}", False))
    return out


def _first_five(items: list[str]) -> str:
    return "; ".join(items[:5]) + (f"; and {len(items) - 5} more" if len(items) > 5 else "")
