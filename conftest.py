"""Runs the Gherkin suite against the reference engine unless --iut says otherwise."""

pytest_plugins = [
    "fixtures.plugin",
    "steps.setup_steps",
    "steps.session_steps",
    "steps.observe_steps",
    "steps.routing_steps",
    "steps.periodic_steps",
    "steps.workload_steps",
]
