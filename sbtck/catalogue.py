"""The rule catalogue (spec/rules.yaml): every rule with its stable id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from sbtck.resources import kit_path

CATALOGUE_PATH = kit_path("spec", "rules.yaml")
RULE_ID = re.compile(r"^[A-Z]+-[0-9A-Z]+$")
# the tag of a reproducer the workload stage shrank from a failing world
WORKLOAD = "workload"
# the kit's own rule ids, beside the catalogue's: what the workload stage checks that no one rule states
KIT_RULES = {
    "INV-messages": "no message lost or duplicated unless a rule drops it",
    "INV-order": "messages of a conversation arrive in order",
    "INV-report": "every report names what exists, in its declared kinds, types and values, in time order",
    "DIFF": "an outcome no allowed behaviour of the reference engine gives",
}


@dataclass(frozen=True)
class Rule:
    id: str
    source: str
    text: str

    @property
    def area(self) -> str:
        return self.id.split("-")[0]


@dataclass(frozen=True)
class Param:
    name: str
    value: Any
    fixed: bool
    note: str
    # an open parameter's allowed values, both ends included; None for a fixed one
    low: float | None = None
    high: float | None = None
    # declared only by an implementation that does what it measures (resend_after_s): no value of the documents
    optional: bool = False


@dataclass(frozen=True)
class Catalogue:
    rules: dict[str, Rule]
    params: dict[str, Param]
    sources: dict[str, str]


@cache
def load(path: Path = CATALOGUE_PATH) -> Catalogue:
    data = yaml.safe_load(path.read_text())
    rules = {r["id"]: Rule(r["id"], r["source"], r["rule"]) for r in data["rules"]}
    params = {
        name: Param(
            name,
            spec.get("value"),
            bool(spec.get("fixed", False)),
            spec.get("note", ""),
            low=spec["range"][0] if "range" in spec else None,
            high=spec["range"][1] if "range" in spec else None,
            optional=bool(spec.get("optional", False)),
        )
        for name, spec in data["params"].items()
    }
    return Catalogue(rules, params, dict(data.get("sources", {})))
