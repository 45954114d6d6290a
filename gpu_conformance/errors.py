"""Errors that end a run with one clear line and an exit code distinct from 'not conformant'."""

from __future__ import annotations

import sys
from collections.abc import Callable

from gpu_conformance.control_chars import printable

# Exit codes: 0 conformant, 1 not conformant (pytest's "tests failed"), these for everything else.
EXIT_USAGE = 4          # pytest's own usage-error code, so bad options look alike everywhere
EXIT_CLUSTER_ACCESS = 3  # could not read the cluster (kubeconfig, API server, permissions)
EXIT_NOT_INSTALLED = 6   # the GPU Operator is not installed (no ClusterPolicy CRD)
EXIT_REGRESSION = 1      # `report history --fail-on-regression`: the newest night got worse (like "not conformant")
# The suite itself failed (a bug, an answer it cannot read): pytest would say 3 ("internal error"), which is taken
# by "cluster unreadable". The reports say ERROR or INCOMPLETE, never a verdict the run did not reach.
EXIT_INTERNAL = 7
# The reports could not be written (report directory full, gone or read-only mid-run; stdout closed): a verdict
# nobody can read is not one, and "1" would claim a check failed.
EXIT_OUTPUT = 8


class ConformanceError(Exception):
    """Base: the message is the whole story, printed as one line, never with a traceback."""

    exit_code = EXIT_CLUSTER_ACCESS

    def __str__(self) -> str:
        # Messages quote the cluster (API error bodies, plugin output, file content): one line, and no escape
        # sequence may reach the terminal that prints it.
        return printable(super().__str__(), keep_newlines=False)


class UsageError(ConformanceError):
    exit_code = EXIT_USAGE


class ClusterAccessError(ConformanceError):
    exit_code = EXIT_CLUSTER_ACCESS

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        # The HTTP status of the API error behind the message, if any: callers decide on it (404 = gone),
        # never on the wording of the message.
        self.status = status


class OperatorNotInstalled(ConformanceError):
    exit_code = EXIT_NOT_INSTALLED


class InternalError(ConformanceError):
    """Something the suite did not expect (a bug, an API answer of a shape it cannot read): no verdict."""

    exit_code = EXIT_INTERNAL


class OutputError(ConformanceError):
    """The reports could not be written or the terminal is gone."""

    exit_code = EXIT_OUTPUT


def internal_error(exc: BaseException, where: str) -> InternalError:
    """One line for an unexpected exception: where it happened, its type and its first line."""
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return InternalError(f"internal error {where}: {type(exc).__name__}" + (f": {first}" if first else ""))


def cli_main(action: Callable[[], object]) -> int:
    """A `python -m` entry point (the binary builders): what `action` returns on stdout, exit 0; its
    ConformanceError as one `error:` line on stderr and the error's exit code, never a traceback."""
    try:
        out = action()
    except ConformanceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if out is not None:
        print(out)
    return 0
