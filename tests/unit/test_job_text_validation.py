"""A job's `name`, `description` and tag values are text: control characters (Unicode category
Cc) and the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) are
refused, naming the field, and so are the line and paragraph separators (U+2028, U+2029) in a
name or a tag; other text (accents, scripts written right to left, emoji with their zero-width
joiners) is kept as given, and a description may hold newlines, tabs and the separators."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest

from duetime.domain.errors import ValidationError
from duetime.domain.jobs import parse_job_spec, spec_to_dict, updated_spec

BODY: dict[str, Any] = {
    "schedule": {"delay_seconds": 10},
    "target": {"type": "handler", "name": "duetime.noop"},
}
CONTROLS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc"]
BIDI_CONTROLS = [chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]]
SEPARATORS = ["\u2028", "\u2029"]
# Text that must be accepted: accents, other scripts, RTL text with its marks (U+200F is a
# mark, not an override), emoji (a ZWJ sequence, a flag, a skin tone), a soft hyphen.
TEXTS = [
    "close day",
    "café · Größe",
    "日次レポート",
    "\u05d3\u05d5\u05d7 \u05d9\u05d5\u05de\u05d9\u200f",  # Hebrew, with a right-to-left mark
    "\u062a\u0642\u0631\u064a\u0631",  # Arabic
    "deploy \U0001f469\u200d\U0001f4bb",  # woman technologist: a ZWJ sequence
    "\U0001f1e9\U0001f1ea \U0001f44d\U0001f3fd",  # flag, thumbs up with a skin tone
    "co\u00adoperate",  # soft hyphen (format, Cf)
    "a\u200bb",  # zero-width space (Cf)
]


def refused(**fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({**BODY, **fields})
    assert "control characters, line breaks or bidirectional overrides" in caught.value.message
    return caught.value.field


@pytest.mark.parametrize(
    "char", CONTROLS + BIDI_CONTROLS + SEPARATORS, ids=lambda c: f"U+{ord(c):04X}"
)
def test_a_name_with_a_control_character_or_bidi_override_is_refused(char: str) -> None:
    assert refused(name=f"invoice{char}fdp.exe") == "name"


@pytest.mark.parametrize(
    "char",
    [c for c in CONTROLS if c not in "\n\t"] + BIDI_CONTROLS,
    ids=lambda c: f"U+{ord(c):04X}",
)
def test_a_description_with_a_control_character_or_bidi_override_is_refused(char: str) -> None:
    assert refused(description=f"line one\nline{char}two") == "description"


@pytest.mark.parametrize(
    "char", ["\x00", "\n", "\t", "\x1b", "\x85", "\u2028", "\u2029", "\u202e", "\u2066"]
)
def test_a_tag_value_with_a_control_character_or_bidi_override_is_refused(char: str) -> None:
    assert refused(tags={"team": "ops", "env": f"prod{char}"}) == "tags.env"


@pytest.mark.parametrize("text", TEXTS)
def test_ordinary_text_and_emoji_are_kept_as_given(text: str) -> None:
    spec = parse_job_spec({**BODY, "name": text, "description": text, "tags": {"team": text}})
    assert (spec.name, spec.description, dict(spec.tags)) == (text, text, {"team": text})
    assert parse_job_spec(spec_to_dict(spec)) == spec


def test_a_description_may_hold_newlines_tabs_and_line_separators() -> None:
    text = "Closes the day.\n\n\tSee the runbook:\thttps://runbooks.example.com/close-day\n"
    text += "Line\u2028separator, paragraph\u2029separator."
    assert parse_job_spec({**BODY, "description": text}).description == text


def test_a_description_may_not_hold_a_carriage_return() -> None:
    assert refused(description="windows\r\nline") == "description"


def test_an_update_with_an_unsafe_name_is_refused_naming_it() -> None:
    spec = parse_job_spec({**BODY, "name": "nightly"})
    with pytest.raises(ValidationError) as caught:
        updated_spec(spec, {"name": "nightly\u202egpj.exe"})
    assert caught.value.field == "name"


@pytest.mark.parametrize(
    "name",
    [
        "   ",
        "\u200b",
        "\u2060\u2060",
        "\u3164",
        "\u2800",
        "\u115f\u1160",
        " \ufeff ",
        "\ufe0f\ufe0f",  # variation selectors (found by review)
        "\u034f",
        "\u180b\U000e0100",
    ],
)
def test_a_name_that_draws_nothing_is_refused(name: str) -> None:
    # Only invisible characters passed the "not blank" rule (found by a contract audit).
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({**BODY, "name": name})
    assert caught.value.field == "name"
    assert "must be a visible string" in caught.value.message


def test_a_name_refused_for_its_length_says_characters() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_job_spec({**BODY, "name": "x" * 129})
    assert str(caught.value).endswith("at most 128 chars")


@pytest.mark.parametrize(
    "name", ["\u2764\ufe0f ops", "a\u034fb", "x\u200b", "\U0001f469\u200d\U0001f4bb"]
)
def test_a_name_with_invisible_characters_among_visible_ones_is_kept(name: str) -> None:
    assert parse_job_spec({**BODY, "name": name}).name == name
