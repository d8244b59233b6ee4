"""The checkout's pytest set-up: the kit's plugin comes by its pytest11 entry point (sbtck.plugin).

Where plugin autoloading is switched off, this file loads it instead, so that
a bare ``pytest`` in the checkout still runs the suite against the reference.
"""

import os

pytest_plugins = ["sbtck.plugin"] if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else []
