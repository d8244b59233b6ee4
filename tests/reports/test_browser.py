"""The report as a person sees it, in headless Chromium (Debian's chromium, driven by Playwright).

Outside CI a machine without chromium skips these tests with the command that
installs it; in CI its absence is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbtck.reports import html, results
from tests.helpers import kit, sbtck, scenarios_tagged

CHROMIUM = shutil.which("chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        message = "no chromium: `apt-get install chromium` (scripts/setup.sh does it as root)"
        if os.environ.get("CI"):
            pytest.fail(f"CI opens the report in a browser, but there is {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def failing_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    run = sbtck("--iut", "python:tests.variants.routing:pinning_ignored", out=out)
    assert run.code == 1
    return out / "index.html"


@pytest.fixture(scope="module")
def passing_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("passing")
    assert sbtck(out=out).code == 0
    return out / "index.html"


@pytest.fixture(scope="module")
def erroring_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("erroring")
    assert sbtck("--iut", "python:tests.variants.activation:crashes_on_d2", out=out).code == 1
    return out / "index.html"


def _open(browser: Any, page_file: Path, viewport: dict[str, int]) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport=viewport)
    problems: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    def on_dialog(dialog: Any) -> None:
        problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("request", lambda req: requests.append(req.url))
    page.goto(page_file.as_uri())
    return page, problems, requests


def test_the_page_loads_alone_and_has_a_row_per_rule(browser: Any, failing_report: Path) -> None:
    page, problems, requests = _open(browser, failing_report, DESKTOP)
    assert problems == []
    assert requests == [failing_report.as_uri()], "the report must need nothing from anywhere"
    assert page.locator('tr[id^="rule-"]').count() == 54
    shots = failing_report.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    page.screenshot(path=str(shots / "desktop.png"))
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(shots / "phone.png"))
    assert (shots / "desktop.png").stat().st_size > 10_000 and (shots / "phone.png").stat().st_size > 10_000
    page.close()


def test_filters_show_only_what_they_select(browser: Any, failing_report: Path) -> None:
    page, problems, _ = _open(browser, failing_report, DESKTOP)
    total = page.locator(".scenario").count()
    failed = page.locator('.scenario[data-status="failed"]').count()
    page.uncheck('#filters input[value="passed"]')
    assert 0 < failed < total
    assert page.locator(".scenario:not([hidden])").count() == failed
    assert page.locator('.scenario:not([hidden])[data-status="failed"]').count() == failed
    page.check('#filters input[value="passed"]')
    page.select_option("#area", "periodic")
    periodic = page.locator(".scenario:not([hidden])").count()
    assert 0 < periodic < total
    page.select_option("#area", "")
    page.fill("#rule", "ACT-09")
    assert page.locator(".scenario:not([hidden])").count() == scenarios_tagged("ACT-09")
    page.fill("#rule", "")
    page.fill("#search", "MIRROR_ADDRESS")
    assert 0 < page.locator(".scenario:not([hidden])").count() < total
    assert problems == []
    page.close()


def test_a_link_to_the_failing_scenario_scrolls_to_it(browser: Any, failing_report: Path) -> None:
    page, problems, _ = _open(browser, failing_report, DESKTOP)
    link = page.locator('tr[id^="rule-"] a:has(.s.failed)').first
    target = link.get_attribute("href")
    assert target and target.startswith("#sc-")
    link.click()
    page.wait_for_function(f"document.getElementById('{target[1:]}').getBoundingClientRect().top < innerHeight")
    top = page.evaluate(f"document.getElementById('{target[1:]}').getBoundingClientRect().top")
    assert 0 <= top < DESKTOP["height"]
    assert problems == []
    page.close()


def test_markup_from_an_implementation_does_not_run(browser: Any, tmp_path: Path) -> None:
    evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    record = results.ScenarioRecord(
        id="features/activation/01_x.feature::[1] a",
        feature_path="features/activation/01_x.feature",
        feature_name=evil,
        name="[1] " + evil,
        line=3,
        tags=["ACT-02"],
        status="error",
        steps=[results.StepRecord("Given", evil, 4, "failed")],
        failure={"step": evil, "line": 4, "kind": "error", "message": "stderr:\n" + evil},
        events=[{"at_ms": 0, "second": 0, "kind": evil, "queue": evil}],
    )
    path = tmp_path / "results.json"
    results.write(path, {"implementation": {"name": evil, "version": evil, "spec": evil}}, [record])
    page_file = html.build([path], tmp_path / "index.html")
    page, problems, requests = _open(browser, page_file, DESKTOP)
    assert page.evaluate("window.pwned") is None
    assert requests == [page_file.as_uri()]
    assert problems == []
    assert evil in page.inner_text("body")  # shown as text
    page.close()


PAYLOAD = '"\'><svg onload="window.pwned=1"><script>window.pwned=2</script><img src=x onerror=window.pwned=3>'


def _poisoned(value: Any) -> Any:
    """VALUE with a script after every string in it, at every depth (the keys kept, so that it is still read)."""
    if isinstance(value, str):
        return value + PAYLOAD
    if isinstance(value, list):
        return [_poisoned(v) for v in value]
    if isinstance(value, dict):
        return {k: _poisoned(v) for k, v in value.items()}
    return value


def test_a_script_after_every_string_of_a_results_file_runs_nowhere(
    browser: Any, failing_report: Path, tmp_path: Path
) -> None:
    """A results.json anyone may have written: every string field, the statuses among them, carries a script,
    and the page built from it (a run, and the same run as its baseline) runs none and asks for nothing."""
    data = json.loads((failing_report.parent / "results.json").read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_poisoned(data)))
    page_file = html.build([path], tmp_path / "index.html", baseline=path)
    page, problems, requests = _open(browser, page_file, DESKTOP)
    assert page.evaluate("window.pwned") is None
    assert requests == [page_file.as_uri()]
    assert problems == []
    page.close()


@pytest.mark.parametrize("which", ["passing_report", "failing_report", "erroring_report"])
def test_axe_core_finds_no_violation(browser: Any, which: str, request: pytest.FixtureRequest) -> None:
    from axe_playwright_python.sync_playwright import Axe

    page_file: Path = request.getfixturevalue(which)
    page, problems, _ = _open(browser, page_file, DESKTOP)
    # the details a reader opens are checked too
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    checked = Axe().run(page)
    assert checked.violations_count == 0, checked.generate_report()
    assert problems == []
    page.close()


@pytest.mark.parametrize(
    ("which", "verdict"),
    [("passing_report", "conforms"), ("failing_report", "does not conform"), ("erroring_report", "does not conform")],
)
def test_the_first_screen_says_the_verdict_in_words_icon_and_colour(
    browser: Any, which: str, verdict: str, request: pytest.FixtureRequest
) -> None:
    page_file: Path = request.getfixturevalue(which)
    page, _, _ = _open(browser, page_file, DESKTOP)
    banner = page.locator("main > .verdict").first
    assert banner.get_attribute("data-verdict") == verdict
    assert f": {verdict}" in banner.inner_text()
    box = banner.bounding_box()
    assert box is not None and box["y"] + box["height"] < DESKTOP["height"]
    colour = banner.evaluate("e => getComputedStyle(e).backgroundColor")
    other = {"conforms": "does not conform", "does not conform": "conforms"}[verdict]
    painted = "c => { const d = document.createElement('div'); d.className = c; document.body.append(d);"
    painted += " return getComputedStyle(d).backgroundColor; }"
    assert colour != page.evaluate(painted, f"verdict v-{other.replace(' ', '-')}")
    # the rules at a glance come next, every rule of the catalogue with a status
    grid = page.locator("ul.grid a")
    assert grid.count() == 54
    assert all(cell.get_attribute("title") for cell in grid.all())
    page.close()


def test_failed_and_error_look_different_and_each_status_has_an_icon(browser: Any, erroring_report: Path) -> None:
    page, _, _ = _open(browser, erroring_report, DESKTOP)

    def background(status: str) -> str:
        return str(
            page.locator(f".count[data-status='{status}'] .s").first.evaluate(
                "e => getComputedStyle(e).backgroundColor"
            )
        )

    assert background("failed") != background("error")
    for status in results.STATUSES:
        badge = page.locator(f".count[data-status='{status}'] .s").first
        assert badge.locator("span[aria-hidden=true]").inner_text().strip() == results.ICONS[status]
        assert status in badge.inner_text()
    # every table has header cells with a scope; every scrolling block takes the keyboard
    assert page.evaluate("[...document.querySelectorAll('table')].every(t => t.querySelector('th[scope]'))")
    assert page.evaluate("[...document.querySelectorAll('pre')].every(p => p.tabIndex === 0)")
    page.close()


def test_axe_core_would_notice_the_old_page(browser: Any, passing_report: Path, tmp_path: Path) -> None:
    """The check has teeth: the page as it was (no <main>, unfocusable scrolling blocks) has violations."""
    from axe_playwright_python.sync_playwright import Axe

    text = passing_report.read_text().replace("<main>", "<div>").replace("</main>", "</div>")
    old = tmp_path / "old.html"
    old.write_text(text.replace(' tabindex="0"', ""))
    page, _, _ = _open(browser, old, DESKTOP)
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    found = {v["id"] for v in Axe().run(page).response["violations"]}
    assert {"region", "landmark-one-main"} <= found, found
    page.close()


@pytest.fixture(scope="module")
def mixed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with failures and errors in every area (tests/fakes/mixed.py)."""
    out = tmp_path_factory.mktemp("mixed")
    assert sbtck("--iut", "python:tests.fakes.mixed:mixed", out=out).code == 1
    return out / "index.html"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280 px", "390 px"])
def test_the_failures_are_listed_on_the_first_screen_and_nothing_overflows(
    browser: Any, mixed_report: Path, viewport: dict[str, int]
) -> None:
    page, problems, _ = _open(browser, mixed_report, viewport)
    listed = page.locator("ol.failures > li")
    statuses = json.loads((mixed_report.parent / "results.json").read_text())["scenarios"]
    assert listed.count() == sum(s["status"] in results.AGAINST for s in statuses)
    box = listed.first.bounding_box()
    assert box is not None and box["y"] + box["height"] <= viewport["height"], box
    # each with its rule, one line of cause and a link to the scenario, which the link scrolls to
    first = listed.first
    assert first.locator(".why").inner_text().strip() and first.locator(".rules").inner_text().strip()
    target = str(first.locator("a").get_attribute("href"))
    first.locator("a").click()
    page.wait_for_function(f"document.getElementById('{target[1:]}').getBoundingClientRect().top < innerHeight")
    # the page never scrolls sideways: wide tables and pictures scroll in their own region
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    shots = mixed_report.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shots / f"mixed-{viewport['width']}.png"))
    assert problems == []
    page.close()


def test_a_differing_log_is_set_side_by_side_and_a_routing_scenario_drawn(browser: Any, mixed_report: Path) -> None:
    page, problems, _ = _open(browser, mixed_report, DESKTOP)
    failed = page.locator('.scenario[data-status="failed"][data-area="routing"]').first
    reported = failed.locator("table.vs.reported")
    assert failed.locator("table.vs.expected").count() == 1 and reported.count() == 1
    assert reported.locator("tbody tr:not(.same)").count() >= 1 and reported.locator("tbody tr.same").count() >= 1
    # the cause is said once: not the log again above the event log
    assert "second      0" not in failed.locator("pre.cause").inner_text()
    picture = failed.locator("svg.sequence")
    assert picture.count() == 1 and picture.locator("line[marker-end]").count() >= 1
    # a scenario that erred says error at its step too
    erred = page.locator('.scenario[data-status="error"]').first
    assert erred.locator(".step .s.error").count() == 1 and erred.locator(".step .s.failed").count() == 0
    assert problems == []
    page.close()


def test_axe_core_finds_no_violation_in_a_mixed_run(browser: Any, mixed_report: Path) -> None:
    from axe_playwright_python.sync_playwright import Axe

    for viewport in (DESKTOP, PHONE):
        page, problems, _ = _open(browser, mixed_report, viewport)
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        checked = Axe().run(page)
        assert checked.violations_count == 0, checked.generate_report()
        assert problems == []
        page.close()


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory, passing_report: Path, failing_report: Path) -> Path:
    """The reference, a routing variant and an activation variant in one page (sbtck report A B C)."""
    out = tmp_path_factory.mktemp("three")
    third = tmp_path_factory.mktemp("third")
    assert sbtck("--iut", "python:tests.variants.activation:ignores_max_queue_readers", out=third).code == 1
    files = [str(folder / "results.json") for folder in (passing_report.parent, failing_report.parent, third)]
    assert kit("report", *files, "--out", str(out)).returncode == 0
    return out / "index.html"


def _unclipped(page: Any, selector: str) -> list[str]:
    """The elements of SELECTOR whose content is wider than their box (scrolled or cut), by their text."""
    return list(
        page.evaluate(
            "s => [...document.querySelectorAll(s)].filter(e => e.offsetParent !== null"
            " && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60))",
            selector,
        )
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280 px", "390 px"])
def test_three_runs_show_a_matrix_that_fits_and_passes_axe(
    browser: Any, three_runs: Path, passing_report: Path, viewport: dict[str, int]
) -> None:
    from axe_playwright_python.sync_playwright import Axe

    page, problems, _ = _open(browser, three_runs, viewport)
    assert page.locator("main > .verdict").count() == 3
    assert page.locator("#interop + p + .wide tr").count() == 1 + 1 + 3  # the heads, every run, each run
    assert page.locator("#interop + p + .wide tr").first.locator("th").count() == 1 + 3  # activation, periodic, routing
    # one row per scenario of the runs (every run here ran the whole suite)
    scenarios = json.loads((passing_report.parent / "results.json").read_text())["scenarios"]
    assert page.locator("tr.scenario-row").count() == len(scenarios)
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    if viewport is DESKTOP:
        assert _unclipped(page, ".wide") == []
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    checked = Axe().run(page)
    assert checked.violations_count == 0, checked.generate_report()
    shots = three_runs.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
    page.locator("#interop").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"matrix-{viewport['width']}.png"))
    assert problems == []
    page.close()


# an implementation's spec as a person may write it: a path with no space or hyphen for the browser to break at
LONG_SPEC = "stdio:/opt/ssb/implementations/ServiceBrokerUnderTest/build/Release/bin/ServiceBrokerAdapterExecutable"


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory: pytest.TempPathFactory, passing_report: Path, failing_report: Path) -> Path:
    """Two runs each of the reference and a routing variant, one of each under LONG_SPEC: runs of one implementation
    are labelled by spec and start (text.run_labels), so the labels are long and unbroken."""
    out = tmp_path_factory.mktemp("four")
    files = []
    for index, report in enumerate((passing_report, passing_report, failing_report, failing_report)):
        run = json.loads((report.parent / "results.json").read_text())
        if index % 2:
            run["implementation"]["spec"] = LONG_SPEC
        saved = out / f"run{index}.json"
        saved.write_text(json.dumps(run))
        files.append(str(saved))
    assert kit("report", *files, "--out", str(out / "page")).returncode == 0
    return out / "page" / "index.html"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280 px", "390 px"])
def test_four_runs_with_long_labels_fit_and_pass_axe(browser: Any, four_runs: Path, viewport: dict[str, int]) -> None:
    """A label's unbroken spec wraps in the verdicts, headings and the Rules table instead of widening the page
    (1,398 px wide at 390 px before it did); the label is still there whole."""
    from axe_playwright_python.sync_playwright import Axe

    page, problems, _ = _open(browser, four_runs, viewport)
    assert page.locator("main > .verdict").count() == 4
    assert LONG_SPEC in (page.locator("main > .verdict").nth(1).text_content() or "")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    assert _unclipped(page, ".verdict, h2, h3, .by-run") == []
    checked = Axe().run(page)
    assert checked.violations_count == 0, checked.generate_report()
    assert problems == []
    page.close()


PLACES = """[...document.querySelectorAll('.pair')].map(p => {
  const [a, b] = [...p.children].map(h => h.getBoundingClientRect());
  return {level: a.top === b.top, fits: a.width + b.width + 20 <= p.getBoundingClientRect().width,
          below: b.top >= a.bottom};
})"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280 px", "390 px"])
def test_a_failing_log_check_fits_side_by_side_or_stacked_and_rule_ids_stay_whole(
    browser: Any, three_runs: Path, viewport: dict[str, int]
) -> None:
    """Nothing of the expected and reported rows is cut: side by side where the pair fits (at 1280 px, the
    activation variant's three columns), one above the other where it does not (the routing variant's seven;
    everything at 390 px); a rule id never breaks at its hyphen."""
    page, problems, _ = _open(browser, three_runs, viewport)
    assert _unclipped(page, ".half") == []
    assert _unclipped(page, ".sequence-region") == []
    places = page.evaluate(PLACES)
    assert places and all(p["level"] if p["fits"] else p["below"] for p in places), places
    if viewport is DESKTOP:
        assert any(p["level"] for p in places) and any(p["below"] for p in places), places
    else:
        assert all(p["below"] for p in places), places
    # one line each: a rule id is never split at its hyphen
    heights = page.evaluate(
        "[...document.querySelectorAll('.rid')].filter(e => e.offsetParent !== null)"
        ".map(e => e.getClientRects().length)"
    )
    assert heights and set(heights) == {1}
    shots = three_runs.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    for name, selector in (("log-check", "routing"), ("log-check-activation", "activation")):
        failed = page.locator(f'.scenario[data-status="failed"][data-area="{selector}"]:has(.pair)').first
        failed.screenshot(path=str(shots / f"{name}-{viewport['width']}.png"))
    view = page.locator('.scenario[data-status="failed"]:has(table.vs.reported):not(:has(.pair))').first
    view.screenshot(path=str(shots / f"view-check-{viewport['width']}.png"))
    assert problems == []
    page.close()


@pytest.fixture(scope="module")
def failures_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workload stage's failures.html of the routing variant's first failing worlds, without Spark."""
    from sbtck.workloads import record
    from sbtck.workloads.stage import Checker
    from tests.variants import routing

    out = tmp_path_factory.mktemp("failures")
    checked = [Checker(routing.network_before_mirror, True).check(seed) for seed in range(8)]
    failed = [record.record(c.row()) for c in checked if c.outcome == results.FAILED]
    assert record.write(failed, out) >= 2
    return out / record.PAGE


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280 px", "390 px"])
def test_failures_html_fits_and_passes_axe(browser: Any, failures_page: Path, viewport: dict[str, int]) -> None:
    """A world's events have a dozen columns: they scroll in a region of their own at 390 px, not the page."""
    from axe_playwright_python.sync_playwright import Axe

    page, problems, _ = _open(browser, failures_page, viewport)
    assert page.locator("section table").count() >= 4
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    checked = Axe().run(page)
    assert checked.violations_count == 0, checked.generate_report()
    assert problems == []
    page.close()
