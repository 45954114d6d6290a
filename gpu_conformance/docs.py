"""Generated parts of the README (check table, fault table): `python -m gpu_conformance.docs` rewrites them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def sections() -> dict[str, str]:
    from gpu_conformance import catalogue
    from gpu_conformance.sim.operator import faults
    return {"checks": catalogue.markdown_table(), "faults": faults.markdown_table()}


def render(text: str) -> str:
    for name, body in sections().items():
        pattern = re.compile(rf"(<!-- BEGIN GENERATED {name} -->\n).*?(<!-- END GENERATED {name} -->)", re.S)
        text = pattern.sub(lambda m, b=body: m.group(1) + b + "\n" + m.group(2), text)
    return text


def main() -> int:
    old = README.read_text()
    new = render(old)
    if "--check" in sys.argv:
        return 0 if new == old else 1
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
