"""What a test-bed component does when its start fails: one rule, used by the control plane."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def cleaned_up_on_failure(error: type[Exception], stop: Callable[[bool], None], kept: str) -> Iterator[None]:
    """Run a start; if it fails, undo it with `stop(keep)`.

    A start that fails with the component's own `error` keeps what it wrote (`stop(True)`): its logs are the only
    clue, so the error is raised again with `kept` (where they are) appended. Anything else — KeyboardInterrupt
    included — stops everything (`stop(False)`): never half a component left running.
    """
    try:
        yield
    except error as exc:
        stop(True)
        raise error(f"{exc} [{kept}]") from None
    except BaseException:
        stop(False)
        raise
