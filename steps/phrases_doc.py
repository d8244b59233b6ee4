"""docs/steps.md, generated from the phrases: ``python -m sbtck.steps.phrases_doc [PATH | -]`` (sbtck.generated).

tests/lint/test_phrases.py fails when the document and the phrases differ.
"""

from __future__ import annotations

from sbtck import generated
from sbtck.steps.phrases import PHRASES, SECTIONS

NOTATIONS = """\
## Notations

- **Names** stand in double quotes: `queue "WorkQueue"`, `dialog "D1"`,
  `session "S1"`; a service, queue or procedure name is looked up in the
  scenario's topology.
- **Messages** are `DIALOG:SEQUENCE`: `D1:0` is the first message sent on
  dialog `D1`.
- **A database** is `INSTANCE.DATABASE` where a step wants a broker instance:
  `sql2.orders` is the broker instance of database `orders` on `sql2`.
- **Times** are seconds from the scenario's start, and may use the open
  values of the catalogue in braces, with `+ - *`: `{activation_empty_window_s} + 1`,
  `2 * {external_activation_timeout_s}`, `{delayed_retry_s} - 1`. A scenario
  thus holds for any value an implementation declares.
- **Tables**: `NULL` is a missing value; a list is written `a, b`, an empty
  one `(none)`; a time column shows `second N`; a cell may read `x or y`
  where the documents leave the choice open, the `second` of a log table too:
  `25 or 30` where they do not say whether the last instant of a duration
  counts (see docs/implementing.md, "Boundaries").
- **Log tables** name an `event` column (`message arrived` for the event
  kind `message_arrived`); the events of the kinds the table names, for the
  queue, dialog or instance the step names and in the span it names, must
  be exactly the rows (other kinds are not looked at), in time order; the
  events of one instant, which the documents never order, compare as a set.
  `second` is when. A column applies to the kinds that declare it as a
  field (`NULL` on the others); fields no column names are ignored. Without
  the capability `decision_trace` the rows of its kinds and the columns
  `rule` and `step` are left out, and the report says so. A table that
  `shows first` holds for the first of those events, and more may follow:
  where a message never arrives, a broker may send it again, and each copy
  is routed, forwarded, dropped or deleted again (`has at least N` counts
  the same way).
"""


def markdown() -> str:
    out = [
        "# Step vocabulary",
        "",
        "Every step the kit's features use, generated from `sbtck/steps/phrases.py` by",
        "`python -m sbtck.steps.phrases_doc`. A phrase is written as the features say it:",
        "`{name}` stands for what varies, `[...]` may be left out, `<a|b>` is one of",
        "its alternatives. *Action* steps read the same after Given and When.",
        "",
        NOTATIONS,
    ]
    for section, title in SECTIONS.items():
        out += [f"## {title}", "", "| step | kind | example | |", "| --- | --- | --- | --- |"]
        for phrase in PHRASES.values():
            if phrase.section == section:
                kind = phrase.kind + (f", with {phrase.argument}" if phrase.argument else "")
                source = phrase.source.replace("|", "\\|")
                example = phrase.example.replace("|", "\\|")
                doc = phrase.doc.replace("|", "\\|")
                out.append(f"| `{source}` | {kind} | `{example}` | {doc} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    generated.main("steps.md", lambda _old: markdown())
