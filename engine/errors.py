"""The one error the engine answers a refused command with."""


class BrokerError(ValueError):
    """A command the broker refuses; the message says why."""
