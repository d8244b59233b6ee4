"""This project's own scenarios, in the kit's step vocabulary."""

from pytest_bdd import scenarios

scenarios("orders.feature")
