"""Concept predicates: parsing, evaluation on hand-made features, one clear error for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.data.interactions import DataError, ItemFeatures
from recframe.unlearning.concepts import ConceptError, parse_concept

FEATS = ItemFeatures(
    title=np.array(["", "Scream", "Alien", "Casablanca", "Psycho", "Toy Story"], dtype=object),
    categories=[
        [],
        ["Horror"],
        ["Horror", "Sci-Fi"],
        ["Drama", "Romance"],
        ["Horror", "Thriller"],
        ["Animation"],
    ],
    year=np.array([0, 1996, 1979, 1942, 1960, 0]),
)


@pytest.mark.parametrize(
    "text, items",
    [
        ('genre == "Horror"', [1, 2, 4]),
        ("genre != 'Horror'", [3, 5]),
        ("year < 1970", [3, 4]),  # item 5's unknown year is not before 1970
        ("year >= 1970", [1, 2]),
        ("year != 1996", [2, 3, 4, 5]),  # != is the negation of ==: unknown years hold
        ('genre in ["Thriller", "Romance"]', [3, 4]),
        ('genre == "Horror" and year < 1970', [4]),
        ('genre == "Animation" or year < 1950', [3, 5]),
        ('not genre == "Horror"', [3, 5]),
        ('genre == "Horror" and not (year >= 1990 or title == "Alien")', [4]),
        ('title in ["Alien", "Toy Story"]', [2, 5]),
        ("year in [1942, 1960]", [3, 4]),
    ],
)
def test_concepts_select_the_hand_picked_items(text: str, items: list[int]) -> None:
    mask = parse_concept(text).mask(FEATS)
    assert np.flatnonzero(mask).tolist() == items
    assert not mask[0]


def test_and_binds_tighter_than_or() -> None:
    a = parse_concept('genre == "Animation" or genre == "Horror" and year < 1970').mask(FEATS)
    assert np.flatnonzero(a).tolist() == [4, 5]


def test_an_unknown_field_names_the_field_the_known_fields_and_the_fix() -> None:
    with pytest.raises(ConceptError) as err:
        parse_concept('genra == "Horror"')
    msg = str(err.value)
    assert "'genra'" in msg and "genre, title, year" in msg and "Fix" in msg
    assert isinstance(err.value, DataError)  # the CLI prints it as one line


@pytest.mark.parametrize(
    "text, needle",
    [
        ('genre == "Horror" and', "expected a comparison"),
        ("year < ", "expected a value"),
        ('genre < "Horror"', "takes ==, != or in"),
        ('year == "old"', "compares with numbers"),
        ('(genre == "Horror"', r"expected \)"),
        ('genre == "Horror" year', "unexpected"),
        ("year ~ 3", "cannot read"),
        ("", "give a predicate"),
    ],
)
def test_syntax_errors_are_one_clear_message(text: str, needle: str) -> None:
    with pytest.raises(ConceptError, match=needle):
        parse_concept(text)


def test_a_field_the_data_lack_is_refused() -> None:
    with pytest.raises(ConceptError, match="no item years"):
        parse_concept("year < 1970").mask(ItemFeatures(categories=[[], ["A"]]))
