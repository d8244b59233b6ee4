"""JUnit XML from results.json, valid against pytest's JUnit schema (junit-10.xsd, as Jenkins' xunit plugin).

One ``<testsuite>`` per feature file, named after the feature, its ``file``
the feature's path; one ``<testcase>`` per scenario: ``classname`` the
feature's path in dots, ``name`` the scenario's title with its ``[n]``.
The schema allows neither attributes beyond name, classname, time and group
nor properties on a test case, so the scenario's line, rules and required
capabilities are in the test case's ``system-out``; a suite's properties are
the implementation and the feature's tags only.

The root ``<testsuites>`` carries no totals: the schema has no ``skipped``
there, and a reader that takes the root's totals (test-results-parser) would
count skipped cases as passed; without them every reader sums the suites.

A scenario rerun by pytest-rerunfailures keeps its earlier attempts as
Maven Surefire writes them (Jenkins, GitLab and the Surefire schema read
them; pytest's junit-10.xsd does not know them): ``<flakyFailure>`` in a
case that passed in the end, ``<rerunFailure>`` in one that failed every time.

The kit's seven statuses, as JUnit counts them (README, "Statuses"):

    passed            a test case with no child
    failed            <failure type="failed">, the kit's own message
    error             <error type="error">
    not applicable    <skipped type="not applicable">, naming the missing capability
    expected failure  <skipped type="expected failure">, naming the expectation
    unexpected pass   <failure type="unexpected pass">
    differs           <skipped type="differs">, with the check that came out otherwise than on the reference
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from sbtck.contract import REQUIRES_TAG
from sbtck.reports.results import (
    DIFFERS,
    ERROR,
    EXPECTED_FAILURE,
    FAILED,
    NOT_APPLICABLE,
    UNEXPECTED_PASS,
    ScenarioRecord,
)
from sbtck.visible import visible

# XML 1.0 cannot carry these characters at all, escaped or not
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: object) -> str:
    # shown as the page shows them: a reader of junit.xml is not misled by a reordered or hidden line either
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", visible(str(value)))


def _capabilities(record: ScenarioRecord) -> list[str]:
    return [t[len(REQUIRES_TAG) :] for t in record.tags if t.startswith(REQUIRES_TAG)]


def _outcome(case: ET.Element, record: ScenarioRecord) -> None:
    failure = record.failure or {}
    message = str(failure.get("message", ""))
    where = f"{failure.get('step', '')} (line {failure.get('line', record.line)})"
    if record.status == FAILED:
        child = ET.SubElement(case, "failure", type=FAILED, message=_text(message.splitlines()[0] if message else ""))
        child.text = _text(f"{where}\n{message}\n\nRerun: {record.rerun}")
    elif record.status == ERROR:
        child = ET.SubElement(case, "error", type=ERROR, message=_text(message.splitlines()[0] if message else ""))
        child.text = _text(f"{where}\n{message}\n\nRerun: {record.rerun}")
    elif record.status == NOT_APPLICABLE:
        ET.SubElement(case, "skipped", type=NOT_APPLICABLE, message=_text(f"not applicable: {record.reason}"))
    elif record.status == EXPECTED_FAILURE:
        child = ET.SubElement(
            case, "skipped", type=EXPECTED_FAILURE, message=_text(f"expected failure: {record.reason}")
        )
        child.text = _text(message)
    elif record.status == DIFFERS:
        child = ET.SubElement(case, "skipped", type=DIFFERS, message=_text(f"differs: {record.reason}"))
        child.text = _text(f"{where}\n{message}")
    elif record.status == UNEXPECTED_PASS:
        ET.SubElement(
            case,
            "failure",
            type=UNEXPECTED_PASS,
            message=_text(f"unexpected pass: {record.reason}, but it passed; remove it from the expectations"),
        )


def _attempts(case: ET.Element, record: ScenarioRecord) -> None:
    kind = "rerunFailure" if record.status in (FAILED, ERROR) else "flakyFailure"
    for earlier in record.earlier_failures:
        message = str(earlier.get("message", ""))
        child = ET.SubElement(
            case, kind, type=_text(earlier.get("status", "")), message=_text(message.splitlines()[0] if message else "")
        )
        trace = ET.SubElement(child, "stackTrace")
        trace.text = _text(f"{earlier.get('step', '')} (line {earlier.get('line', record.line)})\n{message}")


def counts(records: list[ScenarioRecord]) -> dict[str, int]:
    """tests, failures, errors and skipped, as a JUnit reader counts them."""
    statuses = [r.status for r in records]
    return {
        "tests": len(statuses),
        "failures": statuses.count(FAILED) + statuses.count(UNEXPECTED_PASS),
        "errors": statuses.count(ERROR),
        "skipped": statuses.count(NOT_APPLICABLE) + statuses.count(EXPECTED_FAILURE) + statuses.count(DIFFERS),
    }


def _attributes(records: list[ScenarioRecord]) -> dict[str, str]:
    return {key: str(value) for key, value in counts(records).items()} | {
        "time": f"{sum(r.duration_s for r in records):.3f}"
    }


def render(run: dict[str, Any], records: list[ScenarioRecord]) -> ET.Element:
    implementation = run.get("implementation", {})
    root = ET.Element("testsuites", name=_text(f"sbtck: {implementation.get('name', '?')}"))
    root.set("time", _attributes(records)["time"])
    features: dict[str, list[ScenarioRecord]] = {}
    for record in sorted(records, key=lambda r: (r.feature_path, r.line)):
        features.setdefault(record.feature_path, []).append(record)
    for path, scenarios in features.items():
        suite = ET.SubElement(root, "testsuite", name=_text(scenarios[0].feature_name), file=_text(path))
        suite.attrib.update(_attributes(scenarios))
        suite.set("timestamp", str(run.get("started", "")))
        suite.set("hostname", socket.gethostname())
        properties = ET.SubElement(suite, "properties")
        for key, value in (
            ("implementation", f"{implementation.get('name', '?')} {implementation.get('version', '')}".strip()),
            ("iut", implementation.get("spec", "")),
            ("feature tags", " ".join(scenarios[0].feature_tags)),
        ):
            ET.SubElement(properties, "property", name=key, value=_text(value))
        classname = path.removesuffix(".feature").replace("/", ".")
        for record in scenarios:
            case = ET.SubElement(
                suite, "testcase", classname=_text(classname), name=_text(record.name), time=f"{record.duration_s:.3f}"
            )
            _outcome(case, record)
            _attempts(case, record)
            out = ET.SubElement(case, "system-out")
            out.text = _text(
                f"{path}:{record.line}\nstatus: {record.status}\nrules: {' '.join(record.rules) or '-'}\n"
                f"capabilities: {' '.join(_capabilities(record)) or '-'}\n"
                f"checks: {', '.join(f'{n} {what}' for what, n in record.checks.items())}"
                + "".join(f"\nline {s.line} not checked: {s.left_out}" for s in record.steps if s.left_out)
            )
            stderr = (record.failure or {}).get("stderr")
            if stderr:  # the end of the implementation's stderr, where CI systems show a case's error output
                ET.SubElement(case, "system-err").text = _text(stderr)
    return root


def write(run: dict[str, Any], records: list[ScenarioRecord], path: Path) -> Path:
    tree = ET.ElementTree(render(run, records))
    ET.indent(tree, space=" ")
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
