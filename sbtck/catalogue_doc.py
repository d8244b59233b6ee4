"""The table of parameters in docs/implementing.md, generated from the catalogue (spec/rules.yaml):

    python -m sbtck.catalogue_doc [PATH | -]     (default: the kit's docs/implementing.md; sbtck.generated)

The values the documents fix and the ranges the kit reads into the ones they leave open are the catalogue's;
the guide shows them from there, between its two markers, and says no number of its own.
"""

from __future__ import annotations

from sbtck import catalogue, generated

PARAMETERS_BEGIN = "<!-- parameters: generated from spec/rules.yaml by python -m sbtck.catalogue_doc -->\n"
PARAMETERS_END = "<!-- end of the generated parameters -->"


def _unit(name: str) -> str:
    return " s" if name.endswith("_s") else ""


def parameters() -> str:
    rows = ["| parameter | the documents | value | what it is |", "| --- | --- | --- | --- |"]
    for param in catalogue.load().params.values():
        unit = _unit(param.name)
        if param.fixed:
            said, value = "fix it", f"{param.value:g}{unit}"
        else:
            optional = "say nothing of it (declare it or leave it out: see what it is)"
            said = optional if param.optional else "leave it open"
            value = (
                f"any from {param.low:g} to {param.high:g}{unit}, a half second too"
                if unit
                else (f"any from {param.low:g} to {param.high:g}")
            )
        rows.append(f"| `{param.name}` | {said} | {value} | {param.note.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def document(written: str) -> str:
    """docs/implementing.md: WRITTEN as it is, the table between the markers anew."""
    if PARAMETERS_BEGIN not in written or PARAMETERS_END not in written:
        raise SystemExit(f"docs/implementing.md has lost its markers: {PARAMETERS_BEGIN.strip()} ... {PARAMETERS_END}")
    head, rest = written.split(PARAMETERS_BEGIN, 1)
    return head + PARAMETERS_BEGIN + parameters() + PARAMETERS_END + rest.split(PARAMETERS_END, 1)[1]


if __name__ == "__main__":
    generated.main("implementing.md", document)
