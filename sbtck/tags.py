"""Which scenarios a tag expression picks, in Cucumber's syntax (``@ACT-09 and not @informative``).

Cucumber's and behave's users write tags with their ``@``; pytest's ``-m``
form (``ACT-09 or RTR-4``) is still accepted: a tag matches with or without
it. The parser is Cucumber's own (cucumber-tag-expressions).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any

from cucumber_tag_expressions import TagExpressionError, parse  # type: ignore[import-untyped]
from cucumber_tag_expressions.model import Literal  # type: ignore[import-untyped]

from sbtck.errors import ConfigError


def expression(text: str) -> Any:
    """TEXT parsed; a ConfigError saying why it is not a tag expression."""
    try:
        return parse(text)
    except TagExpressionError as exc:
        raise ConfigError(f"--tags {text!r}: not a tag expression ({exc})") from None


def matches(parsed: Any, tags: Iterable[str]) -> bool:
    """Does a scenario with TAGS (pytest-bdd's, without their @) satisfy PARSED?"""
    return bool(parsed.evaluate({form for tag in tags for form in (tag, "@" + tag)}))


def named(parsed: Any) -> Iterator[str]:
    """The tags PARSED names, without their @."""
    if isinstance(parsed, Literal):
        yield parsed.name.removeprefix("@")
    for term in (*getattr(parsed, "terms", ()), *([parsed.term] if hasattr(parsed, "term") else [])):
        yield from named(term)


def unknown(text: str, parsed: Any, known: set[str]) -> str | None:
    """Why TEXT names a tag no scenario carries (with the nearest one: tags are case-sensitive), or None."""
    for tag in named(parsed):
        if tag not in known:
            near = [k for k in known if k.lower() == tag.lower()] or difflib.get_close_matches(tag, sorted(known), 1)
            return f"--tags {text!r}: no scenario carries the tag {tag!r}" + (
                f" (did you mean {near[0]!r}?)" if near else ""
            )
    return None
