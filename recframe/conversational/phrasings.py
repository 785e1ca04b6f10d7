"""Held-out rejection phrasings: how a user rejects a recommendation, in words no baseline was built on.

The generator's ``seen`` rejection turns ("Hmm, that one seems too loud. We would prefer a quiet place.")
are the ones the rejection-aware re-ranker's complaint cues
(:data:`~recframe.conversational.baselines.base.COMPLAINT_CUES`: "too", "not", ...) were written against.
The ``held_out`` templates below were written separately: apart from the value phrase ``{p}`` (a lexicon
phrase such as "loud") and :data:`STOP_WORDS`, they share no word with those cues nor with the ``seen``
templates (tested in ``tests/conversational/test_phrasings.py``). A held-out rejection turn is
``"<opener><complaint>. <wish>."``: the complaint names the rejected value, the wish the wanted one.

Templates by aspect: price and atmosphere values are adjectives ("pricey", "great for kids"), so they share
:data:`COMPLAINT_GENERIC` and :data:`WISH_GENERIC`; distance values ("a drive", "short walk") have their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

__all__ = [
    "PHRASINGS",
    "STOP_WORDS",
    "OPENERS",
    "COMPLAINT_GENERIC",
    "COMPLAINT_DISTANCE",
    "WISH_GENERIC",
    "WISH_DISTANCE",
    "held_out_reject_text",
    "held_out_templates",
    "template_words",
]

#: the generator's rejection phrasing settings: ``seen`` (the templates the baselines were built against)
#: and ``held_out`` (this module)
PHRASINGS = ("seen", "held_out")

#: function words any phrasing may share (articles, pronouns, copulas, prepositions, conjunctions)
STOP_WORDS = frozenset(
    "a an the of for to in on at by from with and or so as is are be was it its this that "
    "i i'd i'm we we'll us our me my you".split()
)

OPENERS = ("Honestly, ", "Well, ", "Ugh, ", "")

#: complaints about a price or atmosphere value ``{p}``
COMPLAINT_GENERIC = (
    "anything {p} is a hard pass",
    "skip anything {p}",
    "I'd steer clear of anything {p}",
    "count us out of anything {p}",
    "anything {p} leaves us cold",
    "we'll pass on anything {p}",
    "anything {p} is off the table",
    "I'd avoid anything {p}",
    "we are done with anything {p}",
)
#: complaints about a distance value ``{p}``, by the rejected value
COMPLAINT_DISTANCE = {
    "walkable": (
        "our hotel sits out by the airport, so a {p} from the center is pointless",
        "a {p} from the center helps us little, we lodge out by the airport",
        "being a {p} from the center matters little to us",
    ),
    "drive": (
        "we lack a car, so {p} is a hard pass",
        "skip anything {p}, we travel on foot",
        "{p} is off the table, we go everywhere on foot",
    ),
}
#: the wanted price or atmosphere value ``{p}``
WISH_GENERIC = (
    "somewhere {p} suits us better",
    "ideally somewhere {p}",
    "what we want is somewhere {p}",
    "our group wants somewhere {p}",
    "show us somewhere {p}",
)
#: the wanted distance value ``{p}``, by that value
WISH_DISTANCE = {
    "walkable": ("ideally a {p} from the center", "show us spots a {p} from the center"),
    "drive": ("driving is fine, even {p}", "we have wheels, so even {p} works"),
}

_WORD = re.compile(r"[a-z']+")


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def held_out_reject_text(
    rng: np.random.Generator, aspect: str, bad: str, good: str, bad_phrase: str, good_phrase: str
) -> str:
    """A held-out rejection turn: the user rejects ``aspect = bad`` (named by ``bad_phrase``) and asks for
    ``good`` (``good_phrase``), with templates drawn from ``rng``."""
    if aspect == "distance":
        complaint, wish = _pick(rng, COMPLAINT_DISTANCE[bad]), _pick(rng, WISH_DISTANCE[good])
    else:
        complaint, wish = _pick(rng, COMPLAINT_GENERIC), _pick(rng, WISH_GENERIC)
    opener = _pick(rng, OPENERS)
    first = complaint.format(p=bad_phrase)
    first = opener + (first if opener else _capital(first))
    return f"{first}. {_capital(wish.format(p=good_phrase))}."


def held_out_templates() -> list[str]:
    """Every held-out template and opener (with ``{p}`` where the value phrase goes)."""
    out = list(OPENERS) + list(COMPLAINT_GENERIC) + list(WISH_GENERIC)
    for table in (COMPLAINT_DISTANCE, WISH_DISTANCE):
        for options in table.values():
            out += options
    return [t for t in out if t]


def template_words(templates: Iterable[str]) -> set[str]:
    """The lower-case words of ``templates`` outside the value slot ``{p}`` and :data:`STOP_WORDS`."""
    words: set[str] = set()
    for template in templates:
        words |= set(_WORD.findall(template.replace("{p}", " ").lower()))
    return words - STOP_WORDS
