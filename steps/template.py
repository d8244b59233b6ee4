"""The notation step phrases are written in, and the two things made from it: a matcher and a text.

A phrase is written once, as the feature files say it, with slots for what
varies::

    session "{session}" receives [top {top:int} ]from queue "{queue}"

- ``{name}`` is a slot: a name inside the phrase's own quotes (``[^"]+``);
  ``{name:kind}`` takes another kind of text (``KINDS``), ``{name:a|b}`` one
  of the words listed (``{name:1}`` just that one).
- ``[...]`` may be left out; ``<x|y>`` is one of its alternatives. Both nest.

From a phrase come the regular expression pytest-bdd matches a step with
(``Template.match``) and the step's text for given slot values
(``Template.text``), which is how the workload stage writes reproducers.
Writing text picks, in every ``<x|y>``, the alternative that says the most
of the values given (the first of equals; a word-list slot only with one of
its words), and leaves a ``[...]`` out when a slot in it has no value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pytest_bdd.parsers import StepParser

from sbtck.errors import TemplateError

KINDS = {
    "name": r'[^"]+',  # inside quotes
    "any": r'[^"]*',  # inside quotes, may be empty
    "int": r"\d+",
    "number": r"\d+(?:\.\d+)?",
    "count": r"no|\d+",
    "word": r"\w+",
    "token": r"\S+",
    "time": r".+?",  # a time expression: 12, {empty_window} + 1 (see timeexpr)
    "rest": r".+",  # everything to the end of the step
    "paren": r"[^)]*",  # up to a closing parenthesis
}


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Slot:
    name: str
    kind: str
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class Seq:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Opt:
    body: Seq


@dataclass(frozen=True)
class Alt:
    choices: tuple[Seq, ...]


Node = Lit | Slot | Seq | Opt | Alt

_TOKEN = re.compile(r"\{(\w+)(?::([^}]*))?\}|[\[\]<>|]|[^{\[\]<>|]+")


def _parse(source: str) -> Seq:
    tokens = [m.group(0) for m in _TOKEN.finditer(source)]
    if "".join(tokens) != source:
        raise TemplateError(f"cannot read the phrase {source!r}")
    position = 0

    def sequence(closers: str) -> Seq:
        nonlocal position
        parts: list[Node] = []
        while position < len(tokens) and tokens[position] not in closers:
            token = tokens[position]
            position += 1
            if token == "[":
                parts.append(Opt(sequence("]")))
                expect("]")
            elif token == "<":
                choices = [sequence("|>")]
                while position < len(tokens) and tokens[position] == "|":
                    position += 1
                    choices.append(sequence("|>"))
                expect(">")
                parts.append(Alt(tuple(choices)))
            elif token.startswith("{"):
                parts.append(_slot(token))
            elif token in "]>|":
                raise TemplateError(f"{token!r} without its opening in {source!r}")
            else:
                parts.append(Lit(token))
        return Seq(tuple(parts))

    def expect(closer: str) -> None:
        nonlocal position
        if position >= len(tokens) or tokens[position] != closer:
            raise TemplateError(f"{closer!r} missing in {source!r}")
        position += 1

    found = sequence("")
    if position != len(tokens):
        raise TemplateError(f"unexpected {tokens[position]!r} in {source!r}")
    return found


def _slot(token: str) -> Slot:
    name, _, kind = token[1:-1].partition(":")
    kind = kind or "name"
    if kind not in KINDS and ("|" in kind or not kind.isalpha()):
        return Slot(name, "words", tuple(kind.split("|")))
    if kind not in KINDS:
        raise TemplateError(f"slot {name!r}: no kind {kind!r}; the kinds are {', '.join(KINDS)} or words a|b")
    return Slot(name, kind)


def _slots(node: Node) -> list[Slot]:
    if isinstance(node, Slot):
        return [node]
    if isinstance(node, Seq):
        return [s for part in node.parts for s in _slots(part)]
    if isinstance(node, Opt):
        return _slots(node.body)
    if isinstance(node, Alt):
        return [s for choice in node.choices for s in _slots(choice)]
    return []


@dataclass
class Template:
    """One phrase in the notation above."""

    source: str
    tree: Seq = field(init=False)
    regex: re.Pattern[str] = field(init=False)
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.tree = _parse(self.source)
        self.names = tuple(dict.fromkeys(s.name for s in _slots(self.tree)))
        self._groups: dict[str, str] = {}
        self.regex = re.compile(self._regex(self.tree))

    def _regex(self, node: Node) -> str:
        if isinstance(node, Lit):
            return re.escape(node.text)
        if isinstance(node, Slot):
            # a slot may stand in several alternatives; a regex group name may not repeat
            group = f"{node.name}__{len(self._groups)}"
            self._groups[group] = node.name
            pattern = "|".join(map(re.escape, node.words)) if node.words else KINDS[node.kind]
            return f"(?P<{group}>{pattern})"
        if isinstance(node, Seq):
            return "".join(self._regex(part) for part in node.parts)
        if isinstance(node, Opt):
            return f"(?:{self._regex(node.body)})?"
        return "(?:" + "|".join(self._regex(choice) for choice in node.choices) + ")"

    def match(self, step: str) -> dict[str, str | None] | None:
        """The slot values of a step's text, None for a slot left out; None if the step is not this phrase."""
        found = self.regex.fullmatch(step)
        if found is None:
            return None
        values: dict[str, str | None] = dict.fromkeys(self.names)
        for group, value in found.groupdict().items():
            if value is not None:
                values[self._groups[group]] = value
        return values

    def text(self, **values: Any) -> str:
        """The step for these slot values; a missing value leaves out the part that needs it."""
        unknown = set(values) - set(self.names)
        if unknown:
            raise TemplateError(f"{self.source!r} has no slot {', '.join(sorted(unknown))}")
        found = _render(self.tree, values)
        if found is None:
            raise TemplateError(f"{self.source!r} cannot say {values}")
        if self.match(found) != {n: _shown(values.get(n)) for n in self.names}:
            raise TemplateError(f"{self.source!r} says {values} as {found!r}, which reads back otherwise")
        return found


def _shown(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _render(node: Node, values: dict[str, Any]) -> str | None:
    if isinstance(node, Lit):
        return node.text
    if isinstance(node, Slot):
        value = _shown(values.get(node.name))
        if value is None or (node.words and value not in node.words):
            return None
        return value
    if isinstance(node, Seq):
        parts = [_render(part, values) for part in node.parts]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    if isinstance(node, Opt):
        return _render(node.body, values) or ""
    best: tuple[int, str] | None = None
    for choice in node.choices:
        found = _render(choice, values)
        said = len({s.name for s in _slots(choice) if values.get(s.name) is not None})
        if found is not None and (best is None or said > best[0]):
            best = (said, found)
    return None if best is None else best[1]


class PhraseParser(StepParser):
    """pytest-bdd's side of a phrase: it matches steps with the phrase's own regular expression."""

    def __init__(self, template: Template) -> None:
        super().__init__(template.source)
        self.template = template

    def parse_arguments(self, name: str) -> dict[str, Any] | None:
        return self.template.match(name)

    def is_matching(self, name: str) -> bool:
        return self.template.regex.fullmatch(name) is not None
