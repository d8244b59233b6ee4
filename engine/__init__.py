"""The reference engine: a deterministic model of SQL Server Service Broker.

It never reads a clock and starts no thread: every call carries the time it
happens at, and work that falls due in between (timer notifications,
WAITFOR time-outs, activated procedures finishing a message) runs in time
order before the call is applied. The same calls therefore give the same
event log, in process or behind any adapter.
"""

from sbtck.contract import Event
from sbtck.engine import views
from sbtck.engine.broker import CONNECTING_CHOICES, Broker
from sbtck.engine.compiling import warn_if_stale
from sbtck.engine.params import EngineParams
from sbtck.errors import BrokerError

warn_if_stale(__name__)

__all__ = ["CONNECTING_CHOICES", "Broker", "BrokerError", "EngineParams", "Event", "views", "warn_if_stale"]
