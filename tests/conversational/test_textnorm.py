"""The verbatim rule: NFC, whitespace runs, zero-width characters, case, compatibility characters."""

from __future__ import annotations

import unicodedata

import pytest

from recframe.conversational.textnorm import normalize, occurs_verbatim, split_sentences

REVIEW = "The cr\u00e8me br\u00fbl\u00e9e was perfect. Only 10\u00a0minutes from the hotel.\nQuiet  room."


def test_nfd_span_matches_nfc_review_and_back() -> None:
    nfd = unicodedata.normalize("NFD", "cr\u00e8me br\u00fbl\u00e9e")
    assert nfd != "cr\u00e8me br\u00fbl\u00e9e"
    assert occurs_verbatim(nfd, REVIEW)
    assert occurs_verbatim("cr\u00e8me br\u00fbl\u00e9e", unicodedata.normalize("NFD", REVIEW))


def test_non_breaking_and_other_unicode_spaces_equal_a_space() -> None:
    assert occurs_verbatim("10 minutes from", REVIEW)  # review has U+00A0
    assert occurs_verbatim("10\u2009minutes\u3000from", REVIEW)  # thin space, ideographic space
    assert occurs_verbatim("hotel. Quiet room", REVIEW)  # newline and double space in the review


def test_whitespace_edges_tabs_and_zero_width() -> None:
    assert occurs_verbatim("  \tQuiet room.\n ", REVIEW)  # leading/trailing whitespace stripped
    assert occurs_verbatim("Qui\u200bet room", REVIEW)  # zero-width space removed
    assert not occurs_verbatim("Quietroom", REVIEW)  # but a space cannot be deleted
    assert not occurs_verbatim("   ", REVIEW)  # empty after normalisation: never verbatim
    assert not occurs_verbatim("", REVIEW)


def test_case_is_significant() -> None:
    assert occurs_verbatim("Quiet room", REVIEW)
    assert not occurs_verbatim("quiet room", REVIEW)
    assert not occurs_verbatim("QUIET ROOM", REVIEW)


def test_compatibility_characters_are_not_folded() -> None:
    review = "A \ufb01ne meal."  # the ligature fi
    assert occurs_verbatim("\ufb01ne", review)
    assert not occurs_verbatim("fine", review)
    assert not occurs_verbatim("\uff31uiet", "Quiet")  # full-width Q is not ASCII Q


def test_partial_words_and_normalize() -> None:
    assert occurs_verbatim("uiet ro", REVIEW)  # character matching, documented
    assert normalize(" a\u00a0\u00a0b\n") == "a b"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("No break", ["No break"]),
        ("Ends with space. ", ["Ends with space."]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert [text[a:b] for a, b in split_sentences(text)] == expected
