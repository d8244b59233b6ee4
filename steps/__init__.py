"""Step definitions in the domain's words; they drive the contract, never the engine."""
