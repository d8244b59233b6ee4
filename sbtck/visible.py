"""Text from an implementation, made visible: the control and bidirectional-formatting characters that would
clear a terminal, set its title, reorder a line or hide part of it are shown as ``[U+202E]`` instead.

Used wherever an implementation's words reach a person: the terminal (a fault's cause and the end of its
stderr, a refusal's reason), the page (``sbtck/reports/text.py``) and junit.xml.
"""

from __future__ import annotations

import re

# C0 and C1 controls but tab and newline, zero-width and bidi marks, embeddings, overrides and isolates, BOM;
# and lone surrogates, which no UTF-8 file or terminal can take
HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")


def visible(text: str) -> str:
    return HIDDEN.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)
