"""The kit's own suite, bound from the installed package."""

from pytest_bdd import scenarios

import sbtck

scenarios(sbtck.features())
