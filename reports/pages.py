"""The jinja2 templates the report page is drawn from (``sbtck/reports/templates/``), and its one escaping.

The report modules shape the data (which rows, which status, which words); the templates hold the markup. Every
``{{ }}`` of a template goes through ``text.escape``, as the environment's ``finalize``: html's escaping, and an
implementation's hidden and control characters shown as ``[U+202E]`` (``sbtck/visible.py``). Autoescape stays on
underneath, for what is not text (a number); what a macro drew is markup already and is printed as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from sbtck.reports import results
from sbtck.reports.text import escape, shorten


def _shown(value: Any) -> Any:
    """Every value a template prints: text escaped and its hidden characters made visible; markup as it is."""
    return Markup(escape(value)) if isinstance(value, str) and not isinstance(value, Markup) else value


def cls(status: str) -> str:
    """A status as a class name: letters, digits and dashes only, whatever a results file says."""
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in status)


PAGES = Environment(
    loader=PackageLoader("sbtck.reports", "templates"), autoescape=True, finalize=_shown, undefined=StrictUndefined
)
PAGES.filters["cls"] = cls
PAGES.filters["icon"] = lambda status: results.ICONS.get(status, "•")
PAGES.filters["shorten"] = lambda text, limit=None: shorten(str(text), *([limit] if limit else []))


@cache
def static(name: str) -> Markup:
    """A style or script file of the kit, trusted as it is: it is the kit's own, never an implementation's."""
    return Markup(files("sbtck.reports").joinpath("static", name).read_text(encoding="utf-8"))


@cache
def _module(template: str) -> Any:
    return PAGES.get_template(template).module


def draw(template: str, macro: str, *args: Any, **kwargs: Any) -> Markup:
    """What the macro MACRO of templates/TEMPLATE draws from ARGS."""
    drawn: Callable[..., str] = getattr(_module(template), macro)
    return Markup(drawn(*args, **kwargs))
