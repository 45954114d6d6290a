"""`gpu-conformance`: the simulated cluster (sim up/down/profiles/faults), reports (report diff), probe cleanup,
the catalogue."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_conformance.errors import EXIT_CLUSTER_ACCESS, EXIT_USAGE, ConformanceError
from gpu_conformance.report import history_cli
from gpu_conformance.targets.provider import option_specs, options_from
from gpu_conformance.targets.sim import SimOptions

DEFAULT_STATE_DIR = Path(".gpu-conformance-sim")


def _sim_up(a: argparse.Namespace) -> int:
    from gpu_conformance.sim.controlplane.cluster import claim_state_dir
    from gpu_conformance.sim.session import start_sim

    state = Path(a.state_dir)
    if (state / "pids.json").exists():
        raise ConformanceError(f"a simulated cluster already runs from {state}; stop it with "
                               f"`gpu-conformance sim down --state-dir {state}`")
    # Before building or booting anything: only a new, empty or sim-marked directory will do.
    claim_state_dir(state)
    o: SimOptions = options_from(SimOptions, lambda dest: getattr(a, dest))
    booted = start_sim(o.profile, o.gpu_nodes, o.cpu_nodes, list(o.faults), state_dir=state, detach=True,
                       operator=o.operator)
    print(booted.kubeconfig)
    return 0


def _sim_down(a: argparse.Namespace) -> int:
    from gpu_conformance.sim.controlplane.cluster import stop_state_dir

    state = Path(a.state_dir)
    if not state.exists():
        print(f"no simulated cluster state in {state}", file=sys.stderr)
        return 0
    stop_state_dir(state)
    print(f"stopped the simulated cluster in {state}", file=sys.stderr)
    return 0


def _sim_profiles(a: argparse.Namespace) -> int:
    from gpu_conformance.sim.profiles.catalogue import PROFILES

    for name, p in PROFILES.items():
        print(f"{name}\t{p.description}")
    return 0


def _sim_faults(a: argparse.Namespace) -> int:
    from gpu_conformance.sim.operator.faults import FAULTS

    for name, f in FAULTS.items():
        print(f"{name}\t{f.description}")
    return 0


def _report_diff(a: argparse.Namespace) -> int:
    from gpu_conformance.control_chars import printable
    from gpu_conformance.report.diff import diff_runs, format_diff
    from gpu_conformance.report_format import load_json

    # A file that is not a conformance.json is a bad argument: ReportFileError, one line naming it, exit 4.
    old, new = load_json(a.old), load_json(a.new)
    print(printable(format_diff(diff_runs(old, new))))
    return 0


def _rbac(a: argparse.Namespace) -> int:
    from importlib import resources

    # Shipped in the package (a symlink to the repository's rbac.yaml, followed when the wheel is built).
    print(resources.files("gpu_conformance").joinpath("rbac.yaml").read_text(), end="")
    return 0


def _probe_cleanup(a: argparse.Namespace) -> int:
    """Delete probe namespaces and pods left by earlier runs (kill -9, a lost API server), found by label.

    A run still in progress by its own account (expires-at, or young without it) keeps its objects unless --force:
    deleting them would make that run INCOMPLETE ("deleted by someone else").
    """
    from gpu_conformance.cluster.connect import connect
    from gpu_conformance.probe.api import ProbeApi
    from gpu_conformance.probe.leftovers import delete_leftovers, find_leftovers

    conn = connect(a.kubeconfig, a.context)
    try:
        api = ProbeApi(conn)
        found = [lo for lo in find_leftovers(api) if lo.age_seconds >= a.older_than]
        spared = [lo for lo in found if lo.in_progress and not a.force]
        doomed = [lo for lo in found if lo not in spared]
        for lo in spared:
            print(f"left alone {lo.describe()}: another run in progress (--force deletes it)")
        if not doomed:
            print("no probe namespaces or pods left by earlier runs")
            return 0
        errors = [] if a.dry_run else delete_leftovers(api, doomed)
        for lo in doomed:
            print(f"{'would delete' if a.dry_run else 'deleted'} {lo.describe()}")
        for e in errors:
            print(f"gpu-conformance: not deleted: {e}", file=sys.stderr)
        return EXIT_CLUSTER_ACCESS if errors else 0
    finally:
        conn.close()


def _catalogue(a: argparse.Namespace) -> int:
    from gpu_conformance import catalogue

    print(catalogue.markdown_table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-conformance", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sim = sub.add_parser("sim", help="the simulated GPU cluster").add_subparsers(dest="sim_cmd", required=True)
    up = sim.add_parser("up", help="start a simulated GPU cluster in the background; prints its kubeconfig")
    for spec in option_specs(SimOptions):  # the options of `pytest --cluster=sim`, without their `sim-` prefix
        spec.add_to(up.add_argument)
    up.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    up.set_defaults(func=_sim_up)
    down = sim.add_parser("down", help="stop the simulated cluster and remove its state")
    down.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    down.set_defaults(func=_sim_down)
    sim.add_parser("profiles", help="list profiles").set_defaults(func=_sim_profiles)
    sim.add_parser("faults", help="list faults").set_defaults(func=_sim_faults)
    rep = sub.add_parser("report", help="reports").add_subparsers(dest="report_cmd", required=True)
    d = rep.add_parser("diff", help="what changed between two conformance.json files")
    d.add_argument("old")
    d.add_argument("new")
    d.set_defaults(func=_report_diff)
    prb = sub.add_parser("probe", help="the probe's objects").add_subparsers(dest="probe_cmd", required=True)
    clean = prb.add_parser("cleanup", help="delete probe namespaces and pods left by earlier runs (by label)")
    clean.add_argument("--kubeconfig", default=None)
    clean.add_argument("--context", default=None)
    clean.add_argument("--older-than", type=float, default=0.0, metavar="SECONDS",
                       help="only what is at least this old")
    clean.add_argument("--force", action="store_true",
                       help="also delete the objects of runs still in progress (by their expires-at annotation, "
                            "or younger than 15 minutes without one)")
    clean.add_argument("--dry-run", action="store_true", help="list, do not delete")
    clean.set_defaults(func=_probe_cleanup)
    history_cli.register(rep)
    sub.add_parser("catalogue", help="print the table of checks (markdown)").set_defaults(func=_catalogue)
    sub.add_parser("rbac", help="print rbac.yaml (gpu-conformance rbac | kubectl apply -f -)").set_defaults(
        func=_rbac)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else 0
    try:
        return int(args.func(args))
    except ConformanceError as e:
        print(f"gpu-conformance: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("gpu-conformance: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
