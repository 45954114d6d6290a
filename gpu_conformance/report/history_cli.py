"""The `report history` subcommand: its options here, its work in report/history.py (loaded only when run)."""

from __future__ import annotations

import argparse
import sys

from gpu_conformance.errors import EXIT_REGRESSION


def register(report_commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    h = report_commands.add_parser(
        "history", help="one self-contained HTML page from a folder of nightly conformance.json files",
        description="Read every conformance.json under DIR (a folder per night, or *.json directly in DIR), "
                    "write one HTML page (the verdict per night, what changed each night, the node x layer cells "
                    "that changed, the first night of each open problem) and print the newest night's summary. "
                    f"Exit codes: 0; {EXIT_REGRESSION} with --fail-on-regression when the newest night got worse "
                    "than the night before; 4 when DIR holds no report or a file that is not one.")
    h.add_argument("dir", metavar="DIR")
    h.add_argument("--output", "-o", metavar="FILE", help="where to write the page (default DIR/history.html)")
    h.add_argument("--summary", choices=("text", "markdown"), default="text",
                   help="format of the summary printed on stdout (markdown: for $GITHUB_STEP_SUMMARY)")
    h.add_argument("--fail-on-regression", action="store_true",
                   help=f"exit {EXIT_REGRESSION} when the newest night regressed against the one before it (a "
                        "single night: when it fails at all; a night without a verdict counts as a regression)")
    h.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from gpu_conformance.control_chars import printable
    from gpu_conformance.report.history import summary_lines, write_history

    path, history = write_history(a.dir, a.output)
    for line in summary_lines(history, path, markdown=a.summary == "markdown"):
        # Lines quote the cluster (root-cause messages): no escape sequence may reach the terminal or CI log.
        print(printable(line, keep_newlines=False))
    sys.stdout.flush()
    return EXIT_REGRESSION if a.fail_on_regression and history.latest_regressed else 0
