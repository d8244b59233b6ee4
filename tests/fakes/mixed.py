"""An implementation that gives every status at once: it ignores acknowledgement pinning (some routing
scenarios fail) and falls over on anything sent on a dialog named D2 (some scenarios are errors)."""

from __future__ import annotations

from sbtck.iut.reference import ReferenceImplementation
from tests.variants.activation import _Crashes
from tests.variants.routing import pinning_ignored


def mixed() -> ReferenceImplementation:
    return _Crashes(broker_class=pinning_ignored().broker_class, name="mixed fortunes")
