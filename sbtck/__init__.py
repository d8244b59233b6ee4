"""sbtck: the compatibility kit for SQL Server Service Broker behaviour.

Public names: ``features()`` (the folder of the kit's .feature files, to bind
with pytest-bdd's ``scenarios``) and ``__version__``. The kit's steps and
options come with its pytest plugin; ``sbtck run`` is the command line.
"""

from sbtck.resources import features

__version__ = "0.1.0"
__all__ = ["__version__", "features"]
