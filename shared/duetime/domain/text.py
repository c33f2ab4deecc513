"""Free text a client gives a job (its name, description, tag values): what it may not hold."""

from __future__ import annotations

import re
import unicodedata

from duetime.domain.errors import ValidationError

# Control characters (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) and the bidirectional
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which make text display
# otherwise than it reads ("invoice\u202efdp.exe" shows as "invoiceexe.pdf"). Other format
# characters stay text: the zero-width joiner of an emoji sequence, the right-to-left mark.
# A line of text (a name, a tag) also refuses the line and paragraph separators (U+2028,
# U+2029: line breaks to a renderer, not to a reader of the JSON).
UNSAFE_TEXT = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")
# The same, but for newlines, tabs and the separators: text of several lines (a description).
UNSAFE_MULTILINE_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def checked_text(value: str, field: str, *, multiline: bool = False) -> str:
    """`value`, or ValidationError naming `field` when it holds an unsafe character."""
    found = (UNSAFE_MULTILINE_TEXT if multiline else UNSAFE_TEXT).search(value)
    if found is not None:
        raise ValidationError(
            field,
            "must not contain control characters, line breaks or bidirectional overrides "
            f"(found U+{ord(found.group()):04X})",
        )
    return value


# Characters that draw nothing but are no white space to str.strip(): the Hangul fillers, the
# blank Braille pattern, the combining grapheme joiner and the variation selectors (a name of
# them alone looked empty; found by a contract audit, and a review).
_INVISIBLE = frozenset(
    "\u115f\u1160\u3164\uffa0\u2800\u034f\u180b\u180c\u180d\u180f"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def blank(text: str) -> bool:
    """Nothing a reader would see: white space, format characters (U+200B, U+2060, …) and
    the fillers above only."""
    return all(c.isspace() or c in _INVISIBLE or unicodedata.category(c) == "Cf" for c in text)


def is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp")


def clean(text: str) -> str:
    """Text made safe for a terminal: what a target answered ends up in a run's error, and
    escape sequences in it must not drive the terminal of whoever reads it (the CLI, a history
    query). Line breaks become spaces, other controls and format characters `\\uXXXX`."""
    if not any(is_control(char) for char in text):
        return text
    return "".join(
        " " if char in "\t\n\r" else (f"\\u{ord(char):04x}" if is_control(char) else char)
        for char in text
    )
