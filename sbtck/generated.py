"""The one command line of the kit's generated documents: ``python -m MODULE [PATH | -]``.

Each generator (steps.md from the phrases, protocol.md's reference part and
protocol.schema.json from the contract) writes the kit's own copy in
``docs/`` by default (in a checkout: an installed kit's are left as installed
and the document goes to standard output), PATH when given, or standard output for ``-``; a test
fails while the kit's copy differs from what its generator makes now.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from sbtck.resources import docs


def main(name: str, make: Callable[[str], str], argv: list[str] | None = None) -> None:
    """Writes MAKE(the kit's current docs/NAME) to the place argv names; MAKE keeps what is written by hand."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1 or (argv and argv[0].startswith("-") and argv[0] != "-"):
        # an option such as --help is no PATH: writing a file named after it surprised a user
        raise SystemExit(f"usage: python -m MODULE [PATH | -]: writes {name} to PATH, or to standard output for -")
    own = docs() / name
    text = make(own.read_text(encoding="utf-8") if own.is_file() else "")
    # an installed kit's documents are the distribution's: without a PATH they go to standard output
    checkout = (own.resolve().parent.parent / "pyproject.toml").is_file()
    target = argv[0] if argv else str(own) if checkout else "-"
    if not argv and not checkout:
        print(f"{own} is an installed kit's, left as installed; give a PATH to write a file", file=sys.stderr)
    if target == "-":
        sys.stdout.write(text)
        return
    Path(target).write_text(text, encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
