"""The OpenAPI document's `If-Match` and `If-None-Match` say what the API takes: every value
their pattern allows is read (an answer other than a 400), and the values the API refuses
break it. An outside contract audit (2026-11-30) found schema-valid tags (`m`, `}_`) answered
400: a client generated from the document could not know them wrong."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.api.openapi import OPENAPI
from duetime.api.params import if_match, if_none_match
from duetime.domain.errors import ValidationError

PARAMETERS = OPENAPI["components"]["parameters"]
HEADERS = {"If-Match": if_match, "If-None-Match": if_none_match}


def pattern(header: str) -> str:
    name = header.replace("-", "")
    schema = PARAMETERS[name]["schema"]
    assert schema["maxLength"] == 1024
    return str(schema["pattern"])


def read(header: str, value: str) -> bool:
    try:
        HEADERS[header](value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("header", sorted(HEADERS))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_value_the_pattern_allows_is_read(header: str, data: st.DataObject) -> None:
    values = st.from_regex(pattern(header), fullmatch=True).filter(lambda v: len(v) <= 1024)
    value = data.draw(values)
    assert read(header, value), value


VALUES = [
    '"3"',
    "3",
    '"3", "4"',
    '"3",,"4"',
    ', "3"',
    '"3" ,',
    'W/"3"',
    '"abc"',
    '""',
    "*",
    " * ",
    # refused by the API
    "m",
    "}_",
    "c(",
    "`",
    '"3""4"',
    '"3" "4"',
    '"a,b"',
    '"a b"',
    ",",
    "",
    " ",
    '*, "3"',
    'w/"3"',
    '"3',
    "\u0663",  # a digit, but not an ASCII one
]


@pytest.mark.parametrize("header", sorted(HEADERS))
@pytest.mark.parametrize("value", VALUES)
def test_the_pattern_allows_what_the_api_reads_and_no_more(header: str, value: str) -> None:
    allowed = re.fullmatch(pattern(header), value) is not None and len(value) >= 1
    assert allowed == read(header, value)


def test_only_ascii_digits_name_a_version() -> None:
    # Python's \\d took "1\u0663" (an Arabic-Indic three) for version 13.
    assert if_match('"1\u0663"') == frozenset()
    assert if_match('"13"') == frozenset({13})
