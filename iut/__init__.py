"""The contract between the kit and an implementation under test, and its adapters."""
