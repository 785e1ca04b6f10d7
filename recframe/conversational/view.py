"""What a system under test sees: the dialogue so far and the public catalogue, never the planted truth.

At the evaluation point ``t`` (a system ``recommend`` turn) a system gets a :class:`DialogueView`:
the dialogue id, city, the shuffled candidate ids and the turns *before* ``t`` with their role, act,
text and, for earlier system recommendations, the POI recommended (the traveller saw it). It does not
get the dialogue's ``target``, the user turns' ``aspects`` annotations, the citations of any turn or
anything of turn ``t`` itself.

The :class:`Catalog` holds POIs without their ``attributes`` (the evaluator's ground truth for aspect
satisfaction: a system learns a POI's price or atmosphere from its reviews, as a traveller would) and
the reviews. Both are built from a release by :meth:`Catalog.from_release` / :func:`dialogue_view`;
baselines receive nothing else (tested: scrambling every planted field leaves their output unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from recframe.conversational.schema import Citation, Dialogue, Release, Review

__all__ = ["ContextTurn", "DialogueView", "PublicPOI", "Catalog", "Prediction", "dialogue_view"]


@dataclass(frozen=True)
class ContextTurn:
    """An earlier turn: ``poi_id`` only on system ``recommend`` turns."""

    role: str
    act: str
    text: str
    poi_id: str | None = None


@dataclass(frozen=True)
class DialogueView:
    """The dialogue before one evaluation point."""

    dialogue_id: str
    city: str
    candidates: tuple[str, ...]
    history: tuple[ContextTurn, ...]

    @property
    def rejected(self) -> tuple[str, ...]:
        """POIs recommended earlier and rejected by the next user turn, in order."""
        out = []
        for prev, turn in zip(self.history, self.history[1:]):
            if prev.act == "recommend" and turn.act == "reject" and prev.poi_id is not None:
                out.append(prev.poi_id)
        return tuple(out)

    @property
    def after_rejection(self) -> bool:
        """Whether the last user turn rejected a recommendation."""
        users = [t for t in self.history if t.role == "user"]
        return bool(users) and users[-1].act == "reject"

    def user_turns(self) -> list[ContextTurn]:
        """The user's turns so far, in order."""
        return [t for t in self.history if t.role == "user"]


@dataclass(frozen=True)
class PublicPOI:
    """A POI as systems see it: no ``attributes``."""

    poi_id: str
    name: str
    city: str
    lat: float
    lon: float
    categories: tuple[str, ...]


class Catalog:
    """Read-only public POIs and reviews (``reviews_of[poi_id]``: review ids in release order)."""

    def __init__(self, pois: Mapping[str, PublicPOI], reviews: Mapping[str, Review]) -> None:
        self.pois = MappingProxyType(dict(pois))
        self.reviews = MappingProxyType(dict(reviews))
        of: dict[str, list[str]] = {}
        for rid, review in self.reviews.items():
            of.setdefault(review.poi_id, []).append(rid)
        self.reviews_of = MappingProxyType({k: tuple(v) for k, v in of.items()})

    @classmethod
    def from_release(cls, release: Release) -> Catalog:
        """The public part of ``release``."""
        pois = {
            pid: PublicPOI(p.poi_id, p.name, p.city, p.lat, p.lon, tuple(p.categories))
            for pid, p in release.pois.items()
        }
        return cls(pois, release.reviews)


def dialogue_view(dialogue: Dialogue, turn_index: int) -> DialogueView:
    """The view of ``dialogue`` at its system recommend turn ``turn_index``."""
    turn = dialogue.turns[turn_index]
    if turn.role != "system" or turn.act != "recommend":
        raise ValueError(
            f"turn {turn_index} of dialogue {dialogue.dialogue_id!r} is a {turn.role} "
            f"{turn.act!r} turn; views are taken at system recommend turns."
        )
    history = tuple(
        ContextTurn(t.role, t.act, t.text, t.poi_id if t.act == "recommend" else None)
        for t in dialogue.turns[:turn_index]
    )
    return DialogueView(dialogue.dialogue_id, dialogue.city, tuple(dialogue.candidates), history)


@dataclass(frozen=True)
class Prediction:
    """A system's answer at one evaluation point.

    ``ranking``: candidate POI ids, best first (it may stop before the last candidate; the first one is
    the recommendation). ``citations``: spans quoted as evidence for the recommendation.
    """

    ranking: tuple[str, ...]
    citations: tuple[Citation, ...] = ()
