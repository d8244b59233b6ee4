"""A pytest plugin (``-p tests.fakes.interrupts_the_page``) under which Ctrl-C arrives while the page is built:
results.json and the files built before the page must be left."""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    from sbtck.reports import html

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    html.build = interrupted  # type: ignore[assignment]
