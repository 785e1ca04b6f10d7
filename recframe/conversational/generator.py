"""A synthetic TRACE-style benchmark with known ground truth (the real release is not redistributable).

What is planted:

- **POIs** in ``n_cities`` US cities, each with four aspects: ``cuisine`` (also its category), ``price``,
  ``atmosphere`` and ``distance`` (``walkable`` when within ``walk_km`` of the city centre, from the
  POI's location, else ``drive``). Review counts are heavy-tailed (log-normal), so popularity varies.
- **Reviews** whose sentences verbalise the POI's true aspect values, either with a lexicon phrase
  ("prices are budget-friendly") or with a paraphrase the lexicon does not hold ("we paid under ten
  dollars each"), mixed with filler ("parking was easy") and *misleading* sentences that mention another
  value only to deny it ("don't come here expecting a quiet dinner") or, rarely, deny the POI's own
  value. Every sentence's ``(aspect, value, asserts)`` is recorded in :class:`GroundTruth`. Some text
  carries Unicode that the verbatim rule must handle (NFD accents, non-breaking spaces).
- **Dialogues**: a target POI fixes the preferences (its four aspect values). The user states the cuisine
  and some other aspects; the rest stay hidden. With 0, 1 or 2 rejections, the system first recommends a
  POI that satisfies every stated aspect but violates the next hidden one, and the user rejects it,
  naming the problem ("that sounds too loud") and revealing the preference; the last recommendation
  is the target. How rejections are worded is ``rejection_phrasings``: ``seen`` (the templates
  :data:`COMPLAINT`/:data:`ASK` below, which the rejection-aware baseline's complaint cues were written
  against) or ``held_out`` (:mod:`recframe.conversational.phrasings`, other words, drawn from a separate
  random stream: the two settings give the same POIs, reviews, dialogues and value phrases; only the
  words around the values in the rejection turns differ). The candidates (shuffled) are the target,
  the rejected POIs, *hard negatives* that satisfy the first-stated aspects, and other POIs of the city;
  none but the target satisfies all preferences, so the target is the unique right answer once every
  preference is known.
- **Gold citations** on every system turn: verbatim spans (with offsets) of the recommended POI's reviews
  that support stated aspects, so the release validates.
- **Citation probes** (kept in :class:`GroundTruth`, not in the release): for every recommend turn, the
  gold citations again, each corrupted with probability ``p_corrupt`` (paraphrased, case-changed, from
  another POI's review, off-aspect filler, or a sentence that denies a value) and otherwise possibly
  re-encoded harmlessly (NFD, non-breaking or doubled spaces), each labelled correct or not: the planted
  citation correctness the Grounding Score is correlated with.

Everything is a function of ``seed``.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, field

import numpy as np

from recframe.conversational.phrasings import PHRASINGS, held_out_reject_text
from recframe.conversational.schema import POI, Citation, Dialogue, Release, Review, Turn
from recframe.conversational.textnorm import normalize, split_sentences

__all__ = [
    "GeneratorConfig",
    "GroundTruth",
    "SentenceTruth",
    "generate",
    "LEXICON",
    "ASPECTS",
    "PHRASINGS",
    "REJECT_SEEN",
    "split_sentences",
]

ASPECTS = ("cuisine", "price", "atmosphere", "distance")

LEXICON: dict[str, dict[str, list[str]]] = {
    "cuisine": {
        "thai": ["thai", "pad thai", "green curry"],
        "italian": ["italian", "pasta", "risotto"],
        "mexican": ["mexican", "tacos", "jalapeño"],
        "japanese": ["japanese", "sushi", "ramen"],
        "indian": ["indian", "biryani", "tikka masala"],
        "french": ["french", "crème brûlée", "bistro"],
        "american": ["american", "burgers", "diner"],
        "mediterranean": ["mediterranean", "falafel", "hummus"],
    },
    "price": {
        "cheap": ["cheap", "inexpensive", "budget-friendly"],
        "moderate": ["moderately priced", "reasonably priced", "mid-range"],
        "expensive": ["expensive", "pricey", "upscale"],
    },
    "atmosphere": {
        "quiet": ["quiet", "calm", "peaceful"],
        "lively": ["lively", "buzzing", "loud"],
        "romantic": ["romantic", "candlelit", "intimate"],
        "family": ["family-friendly", "kid-friendly", "great for kids"],
    },
    "distance": {
        "walkable": ["walking distance", "short walk", "easy walk"],
        "drive": ["a drive", "out of the way", "far from downtown"],
    },
}

#: supporting sentences with a lexicon phrase ({p}); the POI's value is asserted
PHRASED = [
    "Honestly it is {p} and we loved it.",
    "The place is {p}, just as others said.",
    "I would call it {p} without a doubt.",
    "Definitely {p}, which is what we wanted.",
]
PHRASED_BY_ASPECT = {
    "cuisine": ["The {p} here is the real deal.", "Best {p} I have had in town."],
    "price": ["Prices are {p} for the quality.", "It is {p} compared to similar spots."],
    "atmosphere": ["The vibe is {p} all evening.", "A {p} room with nice lighting."],
    "distance": ["It is a {p} from the convention center.", "From our hotel it was a {p}."],
}
#: supporting paraphrases without any lexicon phrase
PARAPHRASE = {
    "price": {
        "cheap": "We paid under ten dollars each.",
        "moderate": "The bill was fair for two courses.",
        "expensive": "Our bill was eye-watering but worth it.",
    },
    "atmosphere": {
        "quiet": "You can hear yourself think in there.",
        "lively": "The music was pumping all night.",
        "romantic": "Perfect spot for an anniversary dinner.",
        "family": "Our toddlers had a blast.",
    },
    "distance": {
        "walkable": "Only 10\u00a0minutes on foot from the main square.",
        "drive": "You will need a car to get there.",
    },
    "cuisine": {
        "thai": "The coconut soup tasted like Bangkok.",
        "italian": "The carbonara was silky.",
        "mexican": "The salsa verde had real heat.",
        "japanese": "The nigiri was pristine.",
        "indian": "The naan came straight from the tandoor.",
        "french": "The cafe\u0301 au lait was perfect.",
        "american": "The fries were crispy.",
        "mediterranean": "The shawarma was juicy.",
    },
}
#: sentences mentioning value {p} only to deny it (asserts=False)
DENIAL = ["Do not come here expecting {p}.", "Not {p} by any stretch.", "It was not as {p} as I hoped."]
FILLER = [
    "The staff were friendly.",
    "Parking was easy to find.",
    "We came on a Tuesday.",
    "The restrooms were clean.",
    "I would come back.",
    "Service was a bit slow at first.",
    "They take reservations.",
    "The menu changes often.",
]
CITIES = {
    "Philadelphia": (39.9526, -75.1652),
    "Tampa": (27.9506, -82.4572),
    "Indianapolis": (39.7684, -86.1581),
    "Nashville": (36.1627, -86.7816),
    "Tucson": (32.2226, -110.9747),
    "New Orleans": (29.9511, -90.0715),
    "Reno": (39.5296, -119.8138),
    "Saint Louis": (38.6270, -90.1994),
}
NAME_A = [
    "Golden",
    "Little",
    "Blue",
    "Old",
    "Red",
    "Silver",
    "Green",
    "Café",
    "Corner",
    "Lucky",
    "Royal",
    "Sunny",
]
NAME_B = [
    "Lotus",
    "Table",
    "Door",
    "Garden",
    "Kitchen",
    "Lantern",
    "Spoon",
    "Harbor",
    "Oven",
    "Fig",
    "Olive",
    "Lumière",
]
#: user-side phrasing of a preference ({p}: a lexicon phrase) and of a complaint about a value
ASK = {
    "cuisine": "I'm craving {p}",
    "price": "something {p}",
    "atmosphere": "a {p} place",
    "distance": "within {p} of downtown",
}
ASK_DISTANCE = {"walkable": "within {p} of downtown", "drive": "happy to take {p}"}
COMPLAINT = {
    "price": "that one sounds too {p} for us",
    "atmosphere": "that one seems too {p}",
    "distance": "that one is {p}",
    "cuisine": "we are not in the mood for {p}",
}
COMPLAINT_DISTANCE = {
    "walkable": "that one is a {p} but downtown is not where we are staying",
    "drive": "that one is {p}",
}
#: a seen rejection turn: the complaint (:data:`COMPLAINT`) and the wish (:data:`ASK`)
REJECT_SEEN = "Hmm, {complaint}. We would prefer {ask}."
KINDS_CORRUPT = ("paraphrased", "case", "wrong_poi", "off_aspect", "denial")


@dataclass(frozen=True)
class SentenceTruth:
    """A review sentence ``text[start:end]`` and what it says: ``asserts`` the POI has ``aspect=value``
    (False: it mentions the value to deny it); ``aspect=None`` for filler."""

    start: int
    end: int
    aspect: str | None
    value: str | None
    asserts: bool


@dataclass
class GroundTruth:
    """The planted truth, kept away from systems.

    ``preferences[dialogue_id]``: all planted aspect values; ``hidden[dialogue_id]``: the aspects revealed
    only by rejections; ``sentences[review_id]``: what each review sentence says; ``probes[(dialogue_id,
    turn index)]``: a citation set for that recommend turn with planted corruptions, as
    ``(citation, correct, kind)`` (kind: ``exact``, ``reencoded_*`` (correct) or one of
    ``KINDS_CORRUPT``).
    """

    preferences: dict[str, dict[str, str]] = field(default_factory=dict)
    hidden: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sentences: dict[str, list[SentenceTruth]] = field(default_factory=dict)
    probes: dict[tuple[str, int], list[tuple[Citation, bool, str]]] = field(default_factory=dict)

    def supports(self, review: Review, span: str, aspect: str, value: str) -> bool:
        """Whether ``span`` overlaps (contains or lies in) a sentence of ``review`` that asserts
        ``aspect=value``."""
        needle = normalize(span)
        if not needle:
            return False
        for s in self.sentences.get(review.review_id, ()):
            if s.aspect == aspect and s.value == value and s.asserts:
                sent = normalize(review.text[s.start : s.end])
                if needle in sent or sent in needle:
                    return True
        return False


@dataclass(frozen=True)
class GeneratorConfig:
    """Sizes and rates of the synthetic benchmark (defaults: the scale of the TRACE paper's POI set)."""

    n_dialogues: int = 1000
    n_pois: int = 2400
    n_cities: int = 8
    reviews_per_poi: float = 14.0
    n_candidates: int = 20
    n_hard_negatives: int = 5
    rejection_probs: tuple[float, float, float] = (0.3, 0.5, 0.2)
    p_corrupt: float = 0.35
    p_reencode: float = 0.15
    walk_km: float = 1.5
    radius_km: float = 5.0
    rejection_phrasings: str = "seen"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_dialogues", "n_pois", "n_cities", "n_candidates"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r}; it must be a positive integer.")
        if not 1 <= self.n_cities <= len(CITIES):
            raise ValueError(f"n_cities={self.n_cities}; it must be between 1 and {len(CITIES)}.")
        if (
            len(self.rejection_probs) != 3
            or abs(sum(self.rejection_probs) - 1) > 1e-9
            or min(self.rejection_probs) < 0
        ):
            raise ValueError(
                f"rejection_probs={self.rejection_probs}; give three probabilities (0, 1, 2 "
                "rejections) that sum to 1."
            )
        if self.rejection_phrasings not in PHRASINGS:
            raise ValueError(
                f"rejection_phrasings={self.rejection_phrasings!r}; use one of {', '.join(PHRASINGS)}."
            )
        for name in ("p_corrupt", "p_reencode"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name}={getattr(self, name)}; it must be in [0, 1].")


def _km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = (
        math.sin((p2 - p1) / 2) ** 2
        + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0 * math.asin(math.sqrt(a))


class _Gen:
    def __init__(self, cfg: GeneratorConfig) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        # held-out rejection wording draws from its own stream, so the main stream (POIs, reviews,
        # dialogues, value phrases) is the same under both phrasings
        self.phrasing_rng = np.random.default_rng([cfg.seed, 31])
        self.truth = GroundTruth()
        self.pois: dict[str, POI] = {}
        self.reviews: dict[str, Review] = {}
        self.by_city: dict[str, list[str]] = {}
        self.reviews_of: dict[str, list[str]] = {}
        self._index: dict[tuple, list[tuple[str, SentenceTruth]]] | None = None

    def pick(self, seq):  # noqa: ANN001, ANN201
        return seq[int(self.rng.integers(len(seq)))]

    # ------------------------------------------------------------------ POIs and reviews
    def make_pois(self) -> None:
        cities = list(CITIES)[: self.cfg.n_cities]
        for i in range(self.cfg.n_pois):
            city = cities[i % len(cities)]
            clat, clon = CITIES[city]
            r = self.cfg.radius_km * math.sqrt(self.rng.random())
            theta = 2 * math.pi * self.rng.random()
            lat = clat + (r * math.cos(theta)) / 111.0
            lon = clon + (r * math.sin(theta)) / (111.0 * math.cos(math.radians(clat)))
            attrs = {
                "cuisine": self.pick(list(LEXICON["cuisine"])),
                "price": self.pick(list(LEXICON["price"])),
                "atmosphere": self.pick(list(LEXICON["atmosphere"])),
                "distance": "walkable" if _km(lat, lon, clat, clon) <= self.cfg.walk_km else "drive",
            }
            name = f"{self.pick(NAME_A)} {self.pick(NAME_B)}"
            if self.rng.random() < 0.5:  # some names stored decomposed (NFD), as scraped text often is
                name = unicodedata.normalize("NFD", name)
            pid = f"poi_{i:05d}"
            self.pois[pid] = POI(
                pid,
                name,
                city,
                round(lat, 6),
                round(lon, 6),
                ("Restaurants", attrs["cuisine"].capitalize()),
                attrs,
            )
            self.by_city.setdefault(city, []).append(pid)
        counts = self.rng.lognormal(0.0, 0.8, self.cfg.n_pois)
        counts = np.maximum(1, np.round(counts / counts.mean() * self.cfg.reviews_per_poi)).astype(int)
        n = 0
        for pid, c in zip(self.pois, counts):
            for _ in range(int(c)):
                self.make_review(f"rev_{n:07d}", pid)
                n += 1

    def sentence(self, aspect: str, value: str) -> str:
        if self.rng.random() < 0.35:
            return PARAPHRASE[aspect][value]
        phrase = self.pick(LEXICON[aspect][value])
        generic = PHRASED if aspect in ("price", "atmosphere") else []
        template = self.pick(generic + PHRASED_BY_ASPECT[aspect])
        return template.format(p=phrase)

    def make_review(self, rid: str, pid: str) -> None:
        attrs = self.pois[pid].attributes
        parts: list[tuple[str, str | None, str | None, bool]] = []
        for aspect in ASPECTS:
            if self.rng.random() < 0.55:
                parts.append((self.sentence(aspect, attrs[aspect]), aspect, attrs[aspect], True))
        if self.rng.random() < 0.2:  # mention another value only to deny it
            aspect = self.pick(["price", "atmosphere"])
            other = self.pick([v for v in LEXICON[aspect] if v != attrs[aspect]])
            parts.append(
                (self.pick(DENIAL).format(p=self.pick(LEXICON[aspect][other])), aspect, other, False)
            )
        if self.rng.random() < 0.05:  # a contrarian denies the POI's own value
            aspect = self.pick(["price", "atmosphere"])
            parts.append(
                (
                    self.pick(DENIAL).format(p=self.pick(LEXICON[aspect][attrs[aspect]])),
                    aspect,
                    attrs[aspect],
                    False,
                )
            )
        for _ in range(1 + int(self.rng.integers(2))):
            parts.append((self.pick(FILLER), None, None, False))
        order = self.rng.permutation(len(parts))
        text, spans = "", []
        for k in order:
            sent, aspect, value, asserts = parts[k]
            if text:
                text += " "
            spans.append(SentenceTruth(len(text), len(text) + len(sent), aspect, value, asserts))
            text += sent
        self.reviews[rid] = Review(rid, pid, text, float(self.rng.integers(2, 6)))
        self.reviews_of.setdefault(pid, []).append(rid)
        self.truth.sentences[rid] = spans

    # ------------------------------------------------------------------ dialogues
    def satisfies(self, pid: str, prefs: dict[str, str]) -> bool:
        attrs = self.pois[pid].attributes
        return all(attrs[a] == v for a, v in prefs.items())

    def make_dialogue(self, index: int) -> Dialogue | None:
        city = self.pick(list(self.by_city))
        pool = self.by_city[city]
        target = self.pick(pool)
        prefs = dict(self.pois[target].attributes)
        n_rej = int(self.rng.choice(3, p=list(self.cfg.rejection_probs)))
        others = [a for a in ASPECTS if a != "cuisine"]
        hidden = [others[k] for k in self.rng.permutation(len(others))[:n_rej]]
        stated = {a: prefs[a] for a in ASPECTS if a not in hidden}
        rejected: list[str] = []
        known = dict(stated)
        for h in hidden:  # a POI that fits all known preferences but violates the next hidden one
            fits = [
                p
                for p in pool
                if p not in rejected
                and p != target
                and self.satisfies(p, known)
                and self.pois[p].attributes[h] != prefs[h]
            ]
            if not fits:
                return None
            rejected.append(self.pick(fits))
            known[h] = prefs[h]
        wrong = [p for p in pool if p != target and p not in rejected and not self.satisfies(p, prefs)]
        hard = [p for p in wrong if self.satisfies(p, stated)]
        hard = [hard[k] for k in self.rng.permutation(len(hard))[: self.cfg.n_hard_negatives]]
        rest = [p for p in wrong if p not in hard]
        n_rest = max(0, self.cfg.n_candidates - 1 - len(rejected) - len(hard))
        rest = [rest[k] for k in self.rng.permutation(len(rest))[:n_rest]]
        cands = [target, *rejected, *hard, *rest]
        cands = [cands[k] for k in self.rng.permutation(len(cands))]
        did = f"dlg_{self.cfg.seed}_{index:06d}"
        turns: list[Turn] = [Turn("user", "inform", self.inform_text(stated), aspects=dict(stated))]
        known = dict(stated)
        for h, rej in zip(hidden, rejected):
            turns.append(self.recommend(did, len(turns), rej, known))
            bad = self.pois[rej].attributes[h]
            turns.append(Turn("user", "reject", self.reject_text(h, bad, prefs[h]), aspects={h: prefs[h]}))
            known[h] = prefs[h]
        turns.append(self.recommend(did, len(turns), target, known))
        turns.append(
            Turn(
                "user",
                "accept",
                self.pick(["Sounds perfect, thanks!", "Great, we will go there.", "That works, thank you."]),
            )
        )
        self.truth.preferences[did] = prefs
        self.truth.hidden[did] = tuple(hidden)
        return Dialogue(did, city, tuple(cands), target, tuple(turns))

    def phrase(self, aspect: str, value: str) -> str:
        return self.pick(LEXICON[aspect][value])

    def inform_text(self, stated: dict[str, str]) -> str:
        clauses = []
        for aspect, value in stated.items():
            tmpl = ASK_DISTANCE[value] if aspect == "distance" else ASK[aspect]
            clauses.append(tmpl.format(p=self.phrase(aspect, value)))
        opener = self.pick(["Hi! ", "Hello, ", "Hey there. ", ""])
        return (
            opener
            + clauses[0][0].upper()
            + clauses[0][1:]
            + (", " + ", ".join(clauses[1:]) if clauses[1:] else "")
            + "."
        )

    def reject_text(self, aspect: str, bad: str, good: str) -> str:
        """The user's rejection of ``aspect = bad``, asking for ``good``, in the configured phrasing."""
        bad_phrase = self.phrase(aspect, bad)
        good_phrase = self.phrase(aspect, good)
        if self.cfg.rejection_phrasings == "held_out":
            return held_out_reject_text(self.phrasing_rng, aspect, bad, good, bad_phrase, good_phrase)
        tmpl = COMPLAINT_DISTANCE[bad] if aspect == "distance" else COMPLAINT[aspect]
        ask = (ASK_DISTANCE[good] if aspect == "distance" else ASK[aspect]).format(p=good_phrase)
        return REJECT_SEEN.format(complaint=tmpl.format(p=bad_phrase), ask=ask)

    def recommend(self, did: str, index: int, pid: str, known: dict[str, str]) -> Turn:
        """A gold recommend turn citing correct spans; its corrupted probe set goes to the truth."""
        support = [
            (rid, s)
            for rid in self.reviews_of[pid]
            for s in self.truth.sentences[rid]
            if s.asserts and s.aspect in known and known[s.aspect] == s.value
        ]
        n = min(len(support), 2 + int(self.rng.integers(2)))
        picked = [support[k] for k in self.rng.permutation(len(support))[:n]]
        cites = tuple(
            Citation(rid, self.reviews[rid].text[s.start : s.end], s.start, s.end, s.aspect)
            for rid, s in picked
        )
        self.truth.probes[(did, index)] = [self.probe(rid, s, pid, known) for rid, s in picked]
        quotes = " and ".join(f"\u201c{c.text}\u201d" for c in cites[:2])
        text = f"How about {self.pois[pid].name}?" + (f" Reviewers say {quotes}." if quotes else "")
        return Turn("system", "recommend", text, poi_id=pid, citations=cites)

    def sentences_with(
        self, aspect: str | None, value: str | None, asserts: bool
    ) -> list[tuple[str, SentenceTruth]]:
        if self._index is None:
            self._index = {}
            for rid, spans in self.truth.sentences.items():
                for x in spans:
                    self._index.setdefault((x.aspect, x.value, x.asserts), []).append((rid, x))
        return self._index.get((aspect, value, asserts), [])

    def probe(
        self, rid: str, s: SentenceTruth, pid: str, known: dict[str, str]
    ) -> tuple[Citation, bool, str]:
        """The citation of sentence ``s``, corrupted with probability ``p_corrupt`` (else maybe
        re-encoded harmlessly)."""
        text = self.reviews[rid].text[s.start : s.end]
        if self.rng.random() < self.cfg.p_corrupt:
            kind = self.pick(KINDS_CORRUPT)
            if kind == "paraphrased":
                words = text.split(" ")
                j = int(self.rng.integers(len(words)))
                words[j] = "really " + words[j]
                return Citation(rid, " ".join(words), aspect=s.aspect), False, kind
            if kind == "case":
                return Citation(rid, text.upper(), aspect=s.aspect), False, kind
            if kind == "wrong_poi":  # verbatim, same aspect value, but another POI's review
                pool = self.sentences_with(s.aspect, s.value, True)
                for _ in range(10):
                    r2, x = pool[int(self.rng.integers(len(pool)))]
                    if self.reviews[r2].poi_id != pid:
                        return (
                            Citation(r2, self.reviews[r2].text[x.start : x.end], aspect=s.aspect),
                            False,
                            kind,
                        )
            own = [(r, x) for r in self.reviews_of[pid] for x in self.truth.sentences[r]]
            if kind == "off_aspect":
                pool = [(r, x) for r, x in own if x.aspect is None]
            else:  # denial: a sentence of this POI that mentions a stated aspect only to deny a value
                pool = [(r, x) for r, x in own if not x.asserts and x.aspect in known]
            if pool:
                r2, x = pool[int(self.rng.integers(len(pool)))]
                return Citation(r2, self.reviews[r2].text[x.start : x.end], x.start, x.end), False, kind
        if self.rng.random() < self.cfg.p_reencode:  # harmless re-encodings the verbatim rule accepts
            variant = self.pick(["nfd", "nbsp", "double_space"])
            if variant == "nfd":
                alt = unicodedata.normalize("NFD", text)
            elif variant == "nbsp":
                alt = text.replace(" ", "\u00a0", 1)
            else:
                alt = text.replace(" ", "  ", 1)
            return Citation(rid, alt, aspect=s.aspect), True, f"reencoded_{variant}"
        return Citation(rid, text, s.start, s.end, s.aspect), True, "exact"


def generate(config: GeneratorConfig | None = None, **overrides: object) -> tuple[Release, GroundTruth]:
    """A synthetic release and its planted truth (``config`` fields overridable by keyword)."""
    cfg = config or GeneratorConfig()
    if overrides:
        cfg = GeneratorConfig(**{**cfg.__dict__, **overrides})
    gen = _Gen(cfg)
    gen.make_pois()
    dialogues: list[Dialogue] = []
    attempts = 0
    while len(dialogues) < cfg.n_dialogues:
        attempts += 1
        if attempts > 20 * cfg.n_dialogues:
            raise ValueError(
                f"could not plant {cfg.n_dialogues} dialogues in {cfg.n_pois} POIs; "
                "raise n_pois or lower n_candidates."
            )
        d = gen.make_dialogue(len(dialogues))
        if d is not None:
            dialogues.append(d)
    lexicon = {a: {v: list(p) for v, p in vals.items()} for a, vals in LEXICON.items()}
    return Release(gen.pois, gen.reviews, dialogues, lexicon), gen.truth
