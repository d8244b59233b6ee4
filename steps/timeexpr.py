"""Times in steps: ``12``, ``{external_activation_timeout_s}``, ``2 * {param} - 1``.

Braces name a parameter of the conformance profile, so a scenario states
the documents' relation ("one second before the time-out ends") and each
implementation is checked against its own declared value.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sbtck.errors import TimeExpressionError

TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|\{([a-z_]+)\}|([-+*]))")


def _tokens(text: str) -> list[str | float]:
    out: list[str | float] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = TOKEN.match(text, pos)
        if match is None:
            raise TimeExpressionError(
                f"cannot read {text!r} as a time at {text[pos:]!r}: "
                "write seconds as 12, {param}, or sums and products such as 2 * {param} - 1"
            )
        number, name, op = match.groups()
        out.append(float(number) if number is not None else ("{" + name + "}" if name else op))
        pos = match.end()
    return out


def evaluate(text: str, param: Callable[[str], float]) -> float:
    tokens = _tokens(text)
    pos = 0

    def atom() -> float:
        nonlocal pos
        if pos >= len(tokens):
            raise TimeExpressionError(f"{text!r} ends where a number or {{param}} should stand")
        token = tokens[pos]
        pos += 1
        if isinstance(token, float):
            return token
        if token == "-":
            return -atom()
        if token.startswith("{"):
            return float(param(token[1:-1]))
        raise TimeExpressionError(f"{text!r}: expected a number or {{param}}, found {token!r}")

    def product() -> float:
        nonlocal pos
        value = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            value *= atom()
        return value

    value = product()
    while pos < len(tokens):
        op = tokens[pos]
        if op not in ("+", "-"):
            raise TimeExpressionError(f"{text!r}: expected + or - before {op!r}")
        pos += 1
        value = value + product() if op == "+" else value - product()
    return value
