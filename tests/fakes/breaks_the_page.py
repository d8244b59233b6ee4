"""A pytest plugin (``-p tests.fakes.breaks_the_page``) under which the page builder raises, as a defect in it
would: the run's results.json and its other files must still be written, and the run exit 3."""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    from sbtck.reports import html

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OverflowError("a defect of the page builder")

    html.build = broken  # type: ignore[assignment]
