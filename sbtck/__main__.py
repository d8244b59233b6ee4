"""``python -m sbtck``: the same as the ``sbtck`` command."""

import sys

from sbtck.cli import main

sys.exit(main())
