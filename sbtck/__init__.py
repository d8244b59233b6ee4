"""sbtck: the compatibility kit for SQL Server Service Broker behaviour."""

__version__ = "0.1.0"
