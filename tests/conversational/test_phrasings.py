"""Held-out rejection phrasings share no word with the re-ranker's cues or the seen templates, and the
generator uses them without changing anything else of a benchmark."""

from __future__ import annotations

import re

import pytest

from recframe.conversational.baselines.base import COMPLAINT_CUES, clauses, is_complaint
from recframe.conversational.baselines.rejection import RejectionAwareSystem
from recframe.conversational.generator import (
    ASK,
    ASK_DISTANCE,
    COMPLAINT,
    COMPLAINT_DISTANCE,
    LEXICON,
    REJECT_SEEN,
    GeneratorConfig,
    generate,
)
from recframe.conversational.phrasings import (
    COMPLAINT_GENERIC,
    STOP_WORDS,
    held_out_templates,
    template_words,
)
from recframe.conversational.view import dialogue_view

CUE_WORDS = template_words(COMPLAINT_CUES)
SEEN_WORDS = template_words(
    [REJECT_SEEN.replace("{complaint}", " ").replace("{ask}", " ")]
    + list(COMPLAINT.values())
    + list(COMPLAINT_DISTANCE.values())
    + list(ASK.values())
    + list(ASK_DISTANCE.values())
)
PHRASES = sorted({p.lower() for vals in LEXICON.values() for ps in vals.values() for p in ps}, key=len)[::-1]

SEEN, _ = generate(n_dialogues=80, n_pois=240, n_cities=2, seed=5)
HELD, _ = generate(n_dialogues=80, n_pois=240, n_cities=2, seed=5, rejection_phrasings="held_out")


def _rejections(release):  # noqa: ANN001, ANN202
    return [(d, i, t) for d in release.dialogues for i, t in enumerate(d.turns) if t.act == "reject"]


def _words_outside_values(text: str) -> set[str]:
    """The words of ``text`` once every lexicon phrase (the value names) is cut out."""
    text = text.lower()
    for phrase in PHRASES:
        text = re.sub(rf"(?<!\w){re.escape(phrase)}(?!\w)", " ", text)
    return set(re.findall(r"[a-z']+", text)) - STOP_WORDS


def test_cue_list_is_what_the_reranker_matches() -> None:
    # the cue words the tests check against are the re-ranker's own (not a copy)
    assert {"too", "not", "no", "never", "instead", "rather", "isn't", "wasn't", "n't"} == CUE_WORDS
    for cue in COMPLAINT_CUES:
        assert is_complaint(f"well {cue} that")


def test_a_contraction_is_a_complaint_cue_inside_its_word() -> None:
    # "n't" ends a word: "don't" and "can't" are negations, as "not" is; words merely holding a cue are not
    for clause in ("we don't want a loud place", "they can't be serious", "it DOESN'T fit", "wasn't quiet"):
        assert is_complaint(clause), clause
    for clause in ("a notable wine list", "nothing but tootsie rolls", "a known noodle bar", "nt"):
        assert not is_complaint(clause), clause


def test_no_generated_user_turn_holds_a_contraction() -> None:
    """The cue fix for "n't" leaves the stored synthetic tables as they are: no user turn has one."""
    user_turns = [t for release in (SEEN, HELD) for d in release.dialogues for t in d.turns
                  if t.role == "user"]
    assert len(user_turns) > 300
    for turn in user_turns:
        assert "n't" not in turn.text.lower(), turn.text


def test_held_out_templates_share_no_word_with_the_cues_or_the_seen_templates() -> None:
    words = template_words(held_out_templates())
    assert len(COMPLAINT_GENERIC) >= 8
    assert not words & CUE_WORDS, words & CUE_WORDS
    assert not any(w.endswith("n't") for w in words)
    assert not words & SEEN_WORDS, words & SEEN_WORDS
    for template in held_out_templates():
        assert not is_complaint(template.replace("{p}", "loud"))


def test_held_out_rejections_hold_none_of_the_seen_cue_words() -> None:
    seen_turns, held_turns = _rejections(SEEN), _rejections(HELD)
    assert len(held_turns) == len(seen_turns) > 30
    for _, _, turn in seen_turns:  # the seen wording is what the cue list catches
        assert any(is_complaint(c) for c in clauses(turn.text))
    for _, _, turn in held_turns:
        assert not any(is_complaint(c) for c in clauses(turn.text)), turn.text
        words = _words_outside_values(turn.text)
        assert not words & (CUE_WORDS | SEEN_WORDS), (turn.text, words & (CUE_WORDS | SEEN_WORDS))


def test_query_repair_flags_no_user_clause_under_held_out_wording() -> None:
    for d in HELD.dialogues:
        for turn in d.turns:
            if turn.role == "user":
                assert not any(is_complaint(c) for c in clauses(turn.text)), turn.text


def test_only_the_rejection_wording_differs() -> None:
    assert HELD.pois == SEEN.pois and HELD.reviews == SEEN.reviews
    changed = 0
    for a, b in zip(SEEN.dialogues, HELD.dialogues):
        assert (a.dialogue_id, a.candidates, a.target) == (b.dialogue_id, b.candidates, b.target)
        for s, h in zip(a.turns, b.turns, strict=True):
            assert (s.role, s.act, s.aspects, s.poi_id, s.citations) == (
                h.role,
                h.act,
                h.aspects,
                h.poi_id,
                h.citations,
            )
            if s.text != h.text:
                assert s.act == "reject"
                changed += 1
    assert changed == len(_rejections(SEEN))


def test_reranker_keeps_the_held_out_complaint_in_its_query() -> None:
    """Why the held-out setting matters: the cue list drops the seen complaint but not the held-out one."""
    dlg, index, _ = _rejections(HELD)[0]
    seen_dlg = next(d for d in SEEN.dialogues if d.dialogue_id == dlg.dialogue_id)
    system = RejectionAwareSystem(base="bm25")
    seen_query = system.query_text(dialogue_view(seen_dlg, index + 1))
    held_query = system.query_text(dialogue_view(dlg, index + 1))
    seen_clauses, held_clauses = clauses(seen_dlg.turns[index].text), clauses(dlg.turns[index].text)
    assert not any(c in seen_query.split(". ") for c in seen_clauses if is_complaint(c))
    assert all(c in held_query.split(". ") for c in held_clauses)


def test_unknown_phrasing_is_refused() -> None:
    with pytest.raises(ValueError, match="rejection_phrasings='unseen'; use one of seen, held_out"):
        GeneratorConfig(rejection_phrasings="unseen")
