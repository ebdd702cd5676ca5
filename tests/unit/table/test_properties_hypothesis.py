"""Property tests: ``hoodie.properties`` escaping round trips like ``java.util.Properties``.

Keys and values are drawn from the characters Java's ``Properties.store`` must escape
(``: = # !``, blanks, line breaks, backslashes), ASCII, Latin-1 and the rest of the
Basic Multilingual Plane; characters beyond it travel as surrogate pairs, as in Java.
"""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.table.properties import (
    CHECKSUM,
    TABLE_NAME,
    TableProperties,
    _escape,
    format_java_properties,
    parse_java_properties,
    table_checksum,
)

SPECIAL = ":=#! \t\n\r\f\\"
#: One character: a special one, or anything in the BMP except surrogates.
CHAR = st.one_of(
    st.sampled_from(SPECIAL),
    st.characters(max_codepoint=0x7F),
    st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)),
)
TEXT = st.text(alphabet=CHAR, max_size=30)
PROPS = st.dictionaries(TEXT, TEXT, max_size=8)
NOW = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc)


@settings(max_examples=50, deadline=None)
@given(PROPS)
def test_format_then_parse_is_the_identity_in_order(props):
    text = format_java_properties(props, "comment", NOW)
    assert list(parse_java_properties(text).items()) == list(props.items())


@settings(max_examples=50, deadline=None)
@given(PROPS)
def test_the_file_is_ascii_one_entry_per_line(props):
    """``store(OutputStream)`` writes ISO-8859-1 with everything else as ``\\uXXXX``; we
    write plain ASCII, and line breaks inside keys or values never split an entry."""
    text = format_java_properties(props, None, NOW)
    assert text.isascii()
    lines = text.splitlines()
    assert lines[0].startswith("#")  # the date line
    assert len(lines) == 1 + len(props)


@settings(max_examples=50, deadline=None)
@given(PROPS, TEXT)
def test_table_properties_keep_every_key_and_refresh_the_checksum(extra, name):
    raw = {**extra, TABLE_NAME: name}
    raw.pop(CHECKSUM, None)
    again = TableProperties.parse(TableProperties(raw).to_text(now=NOW))
    assert again.raw == {**raw, CHECKSUM: str(table_checksum(name))}
    assert again.checksum_valid()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(TEXT.filter(bool), TEXT), max_size=6), st.sampled_from(["=", ":", " ", " = ", "\t: "]))
def test_every_separator_java_accepts_parses(pairs, sep):
    """Hand-written files (Hudi's, other tools') may use ``:`` or blanks as the separator.

    (An empty key needs ``=`` or ``:``: Java skips leading blanks, so `` v`` is key ``v``.)
    """
    text = "".join(f"{_escape(k, True)}{sep}{_escape(v, False)}\n" for k, v in pairs)
    want = {}
    for k, v in pairs:
        want[k] = v
    assert parse_java_properties(text) == want


def test_characters_beyond_the_bmp_round_trip():
    """Written as a UTF-16 surrogate pair (\\uD83D\\uDE00, as Java does), read back as one character."""
    props = {"emoji": "\U0001F600", "\U00010348": "gothic"}
    assert parse_java_properties(format_java_properties(props, None, NOW)) == props


def test_a_comment_with_line_breaks_adds_no_entry():
    text = format_java_properties({"a": "1"}, "x\ny=2\r\nz", NOW)
    assert parse_java_properties(text) == {"a": "1"}
