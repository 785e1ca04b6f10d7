"""The verbatim rule: when a cited span counts as occurring in a review.

A citation is *verbatim* in a review when ``normalize(span)`` is a non-empty substring of
``normalize(review)``, where ``normalize``

1. applies Unicode **NFC** (canonical composition): ``"cafe\\u0301"`` (NFD) and ``"caf\\u00e9"`` (NFC) are the
   same text, rendered identically, and a copy-paste may turn one into the other;
2. maps every run of Unicode whitespace (``str.isspace``: space, tab, newline, U+00A0 non-breaking space,
   U+2009 thin space, U+3000, ...) to a single ASCII space, and strips it at both ends; zero-width
   characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) are removed;
3. keeps **case**, punctuation and compatibility characters: ``"Quiet"`` is not a quote of ``"quiet"``,
   the ligature ``"\\ufb01"`` is not ``"fi"`` and full-width letters are not ASCII (NFKC is *not* applied:
   it changes what the reviewer wrote, not only how it is encoded).

Matching is on characters, not words: a span may start or end inside a word ("uiet plac" is verbatim
in "a quiet place"); span-aspect relevance, not this rule, judges whether a span is a useful quote.
An empty span (after normalisation) is never verbatim.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["normalize", "occurs_verbatim", "split_sentences", "ZERO_WIDTH"]

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
_ZW = re.compile(f"[{ZERO_WIDTH}]")
_WS = re.compile(r"\s+")  # str patterns: \s is Unicode whitespace (includes U+00A0, U+2009, U+3000)


def normalize(text: str) -> str:
    """``text`` under the verbatim rule (module docstring): NFC, whitespace runs -> one space, stripped."""
    text = unicodedata.normalize("NFC", text)
    text = _ZW.sub("", text)
    return _WS.sub(" ", text).strip()


def occurs_verbatim(span: str, text: str, *, normalized_text: str | None = None) -> bool:
    """Whether ``span`` occurs verbatim in ``text`` under the rule of this module.

    ``normalized_text`` (``normalize(text)``, precomputed) saves the work when one text is checked often.
    """
    needle = normalize(span)
    if not needle:
        return False
    hay = normalized_text if normalized_text is not None else normalize(text)
    return needle in hay


_SENT = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the sentences of ``text`` (split after ``.!?`` + whitespace)."""
    out, start = [], 0
    for m in _SENT.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    if start < len(text):
        out.append((start, len(text)))
    return out
