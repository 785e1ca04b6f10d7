"""Baselines on the hand-built release, and no ground-truth leak from generator to baseline inputs."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from recframe.conversational.baselines import (
    BM25System,
    CommandAdapter,
    DenseSystem,
    LLMSystem,
    PopularitySystem,
    RejectionAwareSystem,
    SynthesisSystem,
    build_system,
)
from recframe.conversational.baselines.llm import parse_reply
from recframe.conversational.evaluate import evaluation_points
from recframe.conversational.generator import generate
from recframe.conversational.schema import Citation, Release, Turn
from recframe.conversational.textnorm import occurs_verbatim
from recframe.conversational.view import Catalog, ContextTurn, DialogueView, PublicPOI, dialogue_view
from tests.conversational.fixtures import hash_embed, tiny_release

REL = tiny_release()
CAT = Catalog.from_release(REL)
AFTER = dialogue_view(REL.dialogues[0], 3)  # after the rejection of B
FIRST = dialogue_view(REL.dialogues[0], 1)


class FakeLLM:
    """Deterministic fake: ranks candidates in reverse id order and quotes the first sentence of the
    first review of its top choice; records prompts."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog, self.prompts = catalog, []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        ids = sorted(
            (
                line.split(" | ")[0]
                for line in prompt.splitlines()
                if " | " in line and not line.startswith("Candidates")
            ),
            reverse=True,
        )
        rid = self.catalog.reviews_of[ids[0]][0]
        text = self.catalog.reviews[rid].text.split(". ")[0].rstrip(".") + "."
        return "Sure! " + json.dumps({"ranking": ids, "citations": [{"review_id": rid, "text": text}]})


def _systems() -> list:
    return [
        PopularitySystem(),
        BM25System(),
        DenseSystem(embed=hash_embed),
        SynthesisSystem(embed=hash_embed),
        RejectionAwareSystem("dense", embed=hash_embed),
        RejectionAwareSystem("bm25"),
        LLMSystem(FakeLLM(CAT)),
    ]


def _cited_from_top(pred, catalog: Catalog) -> bool:  # noqa: ANN001
    return all(
        catalog.reviews[c.review_id].poi_id == pred.ranking[0]
        and occurs_verbatim(c.text, catalog.reviews[c.review_id].text)
        for c in pred.citations
    )


def test_views_carry_no_planted_fields() -> None:
    assert {f.name for f in dataclasses.fields(DialogueView)} == {
        "dialogue_id",
        "city",
        "candidates",
        "history",
    }
    assert {f.name for f in dataclasses.fields(ContextTurn)} == {"role", "act", "text", "poi_id"}
    assert "attributes" not in {f.name for f in dataclasses.fields(PublicPOI)}
    assert len(AFTER.history) == 3 and AFTER.rejected == ("B",) and AFTER.after_rejection
    assert all(not hasattr(t, "aspects") and not hasattr(t, "citations") for t in AFTER.history)
    assert not hasattr(CAT, "dialogues") and not hasattr(CAT.pois["A"], "attributes")
    with pytest.raises(ValueError, match="system recommend"):
        dialogue_view(REL.dialogues[0], 0)


def _scrambled(release: Release) -> Release:
    """Every planted field changed: targets, aspect annotations, gold citations, POI attributes."""
    pois = {
        pid: dataclasses.replace(p, attributes={k: "zzz" for k in p.attributes})
        for pid, p in release.pois.items()
    }
    dialogues = []
    for d in release.dialogues:
        turns = tuple(
            dataclasses.replace(
                t,
                aspects={"bogus": "x"} if t.role == "user" else {},
                citations=(Citation("nope", "made up"),) if t.role == "system" else (),
            )
            for t in d.turns
        )
        other = next(c for c in d.candidates if c != d.target)
        dialogues.append(dataclasses.replace(d, target=other, turns=turns))
    return Release(pois, release.reviews, dialogues, {})


def test_no_ground_truth_leak_into_predictions() -> None:
    release, _ = generate(n_dialogues=25, n_pois=120, n_cities=2, seed=11)
    scrambled = _scrambled(release)
    views = [p.view for p in evaluation_points(release)]
    views2 = [p.view for p in evaluation_points(scrambled)]
    assert views == views2  # the views do not change when every planted field does
    for make in (
        lambda: PopularitySystem(),
        lambda: BM25System(),
        lambda: DenseSystem(embed=hash_embed),
        lambda: SynthesisSystem(embed=hash_embed),
        lambda: RejectionAwareSystem("bm25"),
    ):
        a = make().fit(Catalog.from_release(release)).predict_many(views)
        b = make().fit(Catalog.from_release(scrambled)).predict_many(views2)
        assert a == b


def test_candidate_order_does_not_reveal_the_target() -> None:
    release, _ = generate(n_dialogues=40, n_pois=120, n_cities=2, seed=2)
    positions = {d.candidates.index(d.target) for d in release.dialogues}
    assert len(positions) > 5
    view = dialogue_view(release.dialogues[0], release.dialogues[0].recommend_turns()[0])
    flipped = dataclasses.replace(view, candidates=view.candidates[::-1])
    for system in (PopularitySystem(), BM25System()):
        system.fit(Catalog.from_release(release))
        assert system.predict(view).ranking == system.predict(flipped).ranking


def test_every_baseline_ranks_all_candidates_and_cites_its_top_poi() -> None:
    for system in _systems():
        system.fit(CAT)
        for view in (FIRST, AFTER):
            pred = system.predict(view)
            assert sorted(pred.ranking) == sorted(view.candidates), system.name
            assert _cited_from_top(pred, CAT), system.name
    assert PopularitySystem().fit(CAT).predict(AFTER).ranking == ("A", "C", "B")  # 2, 2 (tie: id), 1 reviews


def test_bm25_finds_the_cheap_thai_place_and_cites_it() -> None:
    pred = (
        BM25System(n_citations=1)
        .fit(CAT)
        .predict(dataclasses.replace(AFTER, history=(ContextTurn("user", "inform", "cheap thai"),)))
    )
    assert pred.ranking[0] == "A" and pred.citations[0].review_id in ("rA1", "rA2")


def test_rejection_aware_repairs_the_query_and_never_repeats() -> None:
    system = RejectionAwareSystem("bm25").fit(CAT)
    assert system.query_text(AFTER) == "I want thai food. something cheap please"
    assert system.predict(AFTER).ranking[-1] == "B"
    assert system.name == "Rejection-aware (BM25)"
    with pytest.raises(ValueError, match="wraps"):
        RejectionAwareSystem("popularity")


def test_synthesis_cites_one_sentence_per_clause_from_distinct_sentences() -> None:
    system = SynthesisSystem(embed=hash_embed, max_citations=2).fit(CAT)
    pred = system.predict(AFTER)
    assert 1 <= len(pred.citations) <= 2
    assert len({(c.review_id, c.start) for c in pred.citations}) == len(pred.citations)


def test_llm_adapter_with_a_deterministic_fake() -> None:
    fake = FakeLLM(CAT)
    system = LLMSystem(fake).fit(CAT)
    pred = system.predict(AFTER)
    assert pred.ranking == ("C", "B", "A")
    assert pred.citations == (Citation("rC1", "Loud and fun."),)
    assert "Too pricey, something cheap please." in fake.prompts[0] and "Lotus" in fake.prompts[0]
    assert "aspects" not in fake.prompts[0] and "zzz" not in fake.prompts[0]

    class Garbage:
        def complete(self, prompt: str) -> str:
            return "I cannot decide."

    bad = LLMSystem(Garbage()).fit(CAT)
    assert bad.predict(AFTER).ranking == AFTER.candidates and bad.parse_failures_ == 1
    with pytest.raises(TypeError, match="complete"):
        LLMSystem(object())  # type: ignore[arg-type]


def test_parse_reply_drops_unknown_and_repeated_ids() -> None:
    ranking, cites = parse_reply(
        '{"ranking": ["B", "Z", "B", 3], "citations": [{"review_id": "rB1", '
        '"text": "x"}, {"text": "no id"}]}',
        ("A", "B", "C"),
    )
    assert ranking == ("B", "A", "C") and cites == (Citation("rB1", "x"),)
    assert parse_reply("{broken", ("A",)) is None and parse_reply('{"no": 1}', ("A",)) is None


def test_command_adapter_pipes_the_prompt_to_a_local_program() -> None:
    code = "import sys, json; p = sys.stdin.read(); print(json.dumps({'ranking': ['A'], 'n': len(p)}))"
    reply = CommandAdapter([sys.executable, "-c", code]).complete("hello")
    assert json.loads(reply) == {"ranking": ["A"], "n": 5}
    with pytest.raises(RuntimeError, match="exited with 3"):
        CommandAdapter([sys.executable, "-c", "import sys; sys.exit(3)"]).complete("x")


def test_build_system_names() -> None:
    assert isinstance(build_system("bm25", k1=1.5), BM25System)
    with pytest.raises(ValueError, match="unknown baseline"):
        build_system("gpt")
    assert Turn("user", "accept", "ok").to_dict() == {"role": "user", "act": "accept", "text": "ok"}
