"""The kit's pages (the report page, the workload stage's failures.html) have their markup in jinja2 templates
(sbtck/reports/templates/), never in Python: HTML written in Python escapes by hand, and a value once forgotten runs
in the reader's browser (issue 46, item 7). A module shapes data; ``sbtck/reports/pages.py`` alone escapes, as the
templates' ``finalize``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import ROOT

# a tag opening or closing: <td, </td>, <!doctype; not a comparison such as "a < b"
TAG = re.compile(r"(?<!\w)<(?:[A-Za-z!/][A-Za-z0-9-]*[\s>/]|[A-Za-z][A-Za-z0-9-]*$)")
# the one place text is escaped for the page (text.escape, called from pages.py's finalize)
ESCAPING = {"pages.py", "text.py"}
# the kit's modules, each folder once (sbtck/ links the others in); what is in them writes no page
PACKAGES = ("sbtck", "reports", "workloads", "engine", "steps", "iut")
NO_PAGE = {
    # Markdown's comment markers around the generated part of a document, not a page's markup
    "sbtck/catalogue_doc.py",
    # a step phrase's alternatives are written <one|other>
    "steps/phrases.py",
}


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants, which may name a tag in words."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def markup_in(source: str) -> list[str]:
    """Where SOURCE writes HTML: an f-string or a string with a tag in its text, or a call of an escape function
    by hand; each as ``LINE: what``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if TAG.search(text):
                found.append(f"{node.lineno}: f-string {text[:60]!r}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if TAG.search(node.value):
                found.append(f"{node.lineno}: string {node.value[:60]!r}")
        elif isinstance(node, ast.Call):
            func = node.func
            bare = isinstance(func, ast.Name) and func.id == "escape"
            # html.escape, markupsafe.escape, text.escape; re.escape is no HTML
            named = isinstance(func, ast.Attribute) and func.attr == "escape" and getattr(func.value, "id", "") != "re"
            if bare or named:
                found.append(f"{node.lineno}: escape() by hand")
    return found


def test_the_detector_finds_html_written_in_python() -> None:
    """A check that cannot fail checks nothing: each way of writing a tag in Python is found."""
    for written in (
        "x = f'<td>{v}</td>'",
        'x = f"<span class=\\"s\\">{v}"',
        "x = '<tr>' + v",
        "x = f'{v}</svg>'",
        "x = escape(v)",
        "x = html.escape(v)",
        "x = f'<br>'",
    ):
        assert markup_in(written), written
    for fine in ('"""A <td> in words."""', "x = f'{a} < {b}'", "x = 'a<b'", "x = f'-> {v}'", "x = re.escape(v)"):
        assert not markup_in(fine), fine


def test_no_report_module_writes_html() -> None:
    modules = sorted(p for p in (ROOT / "sbtck" / "reports").glob("*.py") if p.name not in ESCAPING)
    assert any(p.name == "html.py" for p in modules)
    found = [f"sbtck/reports/{p.name}:{where}" for p in modules for where in markup_in(p.read_text())]
    assert found == [], "write the markup in a template of sbtck/reports/templates/:\n" + "\n".join(found)


def test_no_module_of_the_kit_writes_html() -> None:
    """The workload stage's failures.html was written with f-strings until it moved to failures.html.j2; every
    other module of the kit is held to the same."""
    modules = sorted(
        p.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if not p.is_symlink() and "/" in p.relative_to(ROOT).as_posix()
    )
    assert "workloads/record.py" in modules
    assert set(modules) >= NO_PAGE, "a module NO_PAGE names is gone: drop it from NO_PAGE"
    mine = [m for m in modules if m not in NO_PAGE and m not in {f"reports/{name}" for name in ESCAPING}]
    found = [f"{m}:{where}" for m in mine for where in markup_in((ROOT / m).read_text())]
    assert found == [], "write the markup in a template of sbtck/reports/templates/:\n" + "\n".join(found)


def test_the_escaping_modules_write_no_html_either() -> None:
    """pages.py and text.py escape; they write no tag."""
    for name in ESCAPING:
        found = [w for w in markup_in((ROOT / "sbtck" / "reports" / name).read_text()) if "escape()" not in w]
        assert found == [], name


def test_the_templates_are_where_the_markup_is() -> None:
    templates = {p.name for p in (ROOT / "sbtck" / "reports" / "templates").iterdir()}
    assert {"page.html.j2", "report.html.j2", "common.html.j2", "sequence.svg.j2", "failures.html.j2"} <= templates
    assert Path(ROOT / "sbtck" / "reports" / "pages.py").is_file()
