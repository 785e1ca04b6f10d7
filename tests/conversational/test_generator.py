"""The generator plants what it says: unique targets, rejections, hard negatives, sentence meanings."""

from __future__ import annotations

import pytest

from recframe.conversational.generator import LEXICON, GeneratorConfig, generate
from recframe.conversational.metrics import AspectMatcher, turn_context
from recframe.conversational.textnorm import occurs_verbatim

REL, TRUTH = generate(n_dialogues=60, n_pois=240, seed=7)


def _fits(pid: str, prefs: dict[str, str]) -> bool:
    return all(REL.pois[pid].attributes[a] == v for a, v in prefs.items())


def test_target_is_the_unique_candidate_fitting_all_preferences() -> None:
    for d in REL.dialogues:
        prefs = TRUTH.preferences[d.dialogue_id]
        assert [c for c in d.candidates if _fits(c, prefs)] == [d.target]
        assert len(d.candidates) == len(set(d.candidates)) == 20


def test_rejections_reveal_hidden_preferences_and_final_recommendation_is_target() -> None:
    counts = {0: 0, 1: 0, 2: 0}
    for d in REL.dialogues:
        prefs, hidden = TRUTH.preferences[d.dialogue_id], TRUTH.hidden[d.dialogue_id]
        recs = d.recommend_turns()
        counts[len(recs) - 1] += 1
        assert len(recs) == len(hidden) + 1
        assert d.turns[recs[-1]].poi_id == d.target and d.turns[-1].act == "accept"
        for r, h in zip(recs[:-1], hidden):
            ctx = turn_context(d, r)
            rejected = d.turns[r].poi_id
            assert _fits(rejected, ctx.stated) and REL.pois[rejected].attributes[h] != prefs[h]
            assert d.turns[r + 1].act == "reject" and d.turns[r + 1].aspects == {h: prefs[h]}
        assert turn_context(d, recs[-1]).stated == prefs  # every preference known at the end
    assert min(counts.values()) > 0


def test_sentence_truth_matches_review_text() -> None:
    match = AspectMatcher(LEXICON)
    for rid, spans in list(TRUTH.sentences.items())[:300]:
        text = REL.reviews[rid].text
        attrs = REL.pois[REL.reviews[rid].poi_id].attributes
        for s in spans:
            sentence = text[s.start : s.end]
            assert sentence and sentence[-1] in ".!?"
            if s.asserts:
                assert attrs[s.aspect] == s.value
            elif s.aspect is not None:  # a denial mentions the value it denies
                assert match.mentions(sentence, s.aspect, s.value)


def test_probes_label_corruptions() -> None:
    kinds = {}
    for (did, turn), probe in TRUTH.probes.items():
        dlg = next(d for d in REL.dialogues if d.dialogue_id == did)
        poi = dlg.turns[turn].poi_id
        for cite, correct, kind in probe:
            kinds[kind] = kinds.get(kind, 0) + 1
            review = REL.reviews[cite.review_id]
            verbatim = review.poi_id == poi and occurs_verbatim(cite.text, review.text)
            if kind in ("paraphrased", "case", "wrong_poi"):
                assert not verbatim and not correct
            else:
                assert verbatim and correct == (kind == "exact" or kind.startswith("reencoded"))
    assert {"exact", "paraphrased", "wrong_poi", "off_aspect"} <= kinds.keys()


def test_deterministic_and_config_errors() -> None:
    again, _ = generate(n_dialogues=60, n_pois=240, seed=7)
    assert again.dialogues == REL.dialogues
    with pytest.raises(ValueError, match="n_cities"):
        GeneratorConfig(n_cities=9)
    with pytest.raises(ValueError, match="rejection_probs"):
        GeneratorConfig(rejection_probs=(0.5, 0.5, 0.5))
