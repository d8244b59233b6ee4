"""An implementation that gives every status at once: it ignores acknowledgement pinning (some routing
scenarios fail), falls over on anything sent on a dialog named D2 (some scenarios are errors) and connects
only when notified, where the reference connects at once (the @informative periodic/04 [8] differs)."""

from __future__ import annotations

from sbtck.iut.reference import ReferenceImplementation
from tests.variants.activation import _Crashes
from tests.variants.allowed import connects_on_the_next_notification
from tests.variants.routing import pinning_ignored


def mixed() -> ReferenceImplementation:
    broker = pinning_ignored().broker_class
    transport = connects_on_the_next_notification().broker_class.transport_class
    return _Crashes(broker_class=type("MixedBroker", (broker,), {"transport_class": transport}), name="mixed fortunes")
