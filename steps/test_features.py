"""Binds every scenario of the kit's features (or of SBTCK_FEATURES, such as a workload's reproducers) to a test.

Run it with ``sbtck run``, or from any project with ``pytest --pyargs sbtck``.
"""

import os

from pytest_bdd import scenarios

from sbtck import features

scenarios(*(os.environ.get("SBTCK_FEATURES") or str(features())).split(os.pathsep))
