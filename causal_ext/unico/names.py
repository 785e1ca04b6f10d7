"""How variables are named in the narrative and code renderings.

* **Published networks** (bnlearn's asia, cancer, earthquake, survey, sachs, child) and the textbook
  examples get a hand-written :class:`Glossary` from the variables' documented meanings: a unit
  ("patient", "cell"), a noun phrase per variable ("smoking") and, where it reads better than
  ``"<noun> is <state>"``, a full clause per state ("the patient smokes"). The narrative then talks
  about the real-world domain while every number comes from the network's CPTs.
* **Random networks** use invented, pronounceable nonsense nouns ("the blicket is on") drawn without
  replacement from :data:`NONSENSE_NOUNS`, with neutral state words (on/off, low/high,
  low/medium/high). Nonsense names carry no world knowledge, so commonsense cannot stand in for the
  computation (the "anti-commonsensical" idea of CLadder, Jin et al. 2023).

The code rendering uses the variable names themselves as dictionary keys and the symbolic rendering
uses single letters in topological order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["GLOSSARIES", "NONSENSE_NOUNS", "Glossary", "glossary_for", "letters", "nonsense_variables"]

NONSENSE_NOUNS: tuple[str, ...] = (
    "blicket",
    "dax",
    "wug",
    "fep",
    "toma",
    "zorb",
    "kiki",
    "bouba",
    "glorp",
    "snib",
    "trell",
    "vorn",
    "quib",
    "plimp",
    "mord",
    "zank",
    "flerb",
    "grot",
    "lumm",
    "nerp",
    "pazz",
    "rusk",
    "tiv",
    "yorp",
    "brell",
    "cluv",
    "dreem",
    "frass",
    "gimb",
    "hoov",
    "jeck",
    "klom",
    "mip",
    "nuth",
    "obb",
    "prad",
    "skiv",
    "tump",
    "vask",
    "wemb",
    "zell",
    "bix",
    "corf",
    "dwim",
    "elk",
    "fump",
    "gorb",
    "harl",
)
"""Invented nouns for the variables of random networks (all valid Python identifiers)."""

STATE_WORDS: dict[int, tuple[tuple[str, ...], ...]] = {
    2: (("off", "on"), ("low", "high"), ("absent", "present")),
    3: (("low", "medium", "high"),),
    4: (("none", "low", "medium", "high"),),
}
"""Neutral state names for random networks, by number of states."""


@dataclass(frozen=True)
class Glossary:
    """Narrative names of one network's variables.

    Attributes:
        unit: what one sample is ("patient"); plural adds an ``s`` unless ``units`` is given.
        nouns: variable -> noun phrase ("smoking").
        clauses: variable -> {state: clause} ("the patient smokes"); missing ones read
            ``"<noun> is <state>"``.
        units: plural of ``unit`` when it is not ``unit + "s"``.
    """

    unit: str = "case"
    nouns: Mapping[str, str] = field(default_factory=dict)
    clauses: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    units: str = ""

    @property
    def plural(self) -> str:
        """The plural of the unit."""
        return self.units or self.unit + "s"

    def noun(self, var: str) -> str:
        """Noun phrase for ``var``."""
        return self.nouns.get(var, f"the {var}")

    def clause(self, var: str, state: str) -> str:
        """A clause stating that ``var`` is in ``state`` (lower-case start, no full stop)."""
        got = self.clauses.get(var, {}).get(state)
        return got if got else f"{self.noun(var)} is {state.replace('_', ' ')}"


def _yes_no(subject: str, has: str, has_not: str) -> dict[str, str]:
    return {"yes": f"{subject} {has}", "no": f"{subject} {has_not}"}


def _tf(subject: str, has: str, has_not: str) -> dict[str, str]:
    return {"True": f"{subject} {has}", "False": f"{subject} {has_not}"}


_PATIENT = "the patient"
GLOSSARIES: dict[str, Glossary] = {
    "asia": Glossary(
        unit="patient",
        nouns={
            "asia": "a recent visit to Asia",
            "tub": "tuberculosis",
            "smoke": "smoking",
            "lung": "lung cancer",
            "bronc": "bronchitis",
            "either": "tuberculosis or lung cancer",
            "xray": "the chest X-ray result",
            "dysp": "shortness of breath",
        },
        clauses={
            "asia": _yes_no(_PATIENT, "recently visited Asia", "did not recently visit Asia"),
            "tub": _yes_no(_PATIENT, "has tuberculosis", "does not have tuberculosis"),
            "smoke": _yes_no(_PATIENT, "smokes", "does not smoke"),
            "lung": _yes_no(_PATIENT, "has lung cancer", "does not have lung cancer"),
            "bronc": _yes_no(_PATIENT, "has bronchitis", "does not have bronchitis"),
            "either": _yes_no(
                _PATIENT, "has tuberculosis or lung cancer", "has neither tuberculosis nor lung cancer"
            ),
            "xray": {"yes": "the chest X-ray is abnormal", "no": "the chest X-ray is normal"},
            "dysp": _yes_no(_PATIENT, "is short of breath", "is not short of breath"),
        },
    ),
    "cancer": Glossary(
        unit="person",
        units="people",
        nouns={
            "Pollution": "pollution exposure",
            "Smoker": "smoking",
            "Cancer": "cancer",
            "Xray": "the X-ray result",
            "Dyspnoea": "shortness of breath",
        },
        clauses={
            "Pollution": {
                "low": "the person's pollution exposure is low",
                "high": "the person's pollution exposure is high",
            },
            "Smoker": _tf("the person", "smokes", "does not smoke"),
            "Cancer": _tf("the person", "has cancer", "does not have cancer"),
            "Xray": {"positive": "the X-ray is positive", "negative": "the X-ray is negative"},
            "Dyspnoea": _tf("the person", "is short of breath", "is not short of breath"),
        },
    ),
    "earthquake": Glossary(
        unit="household",
        nouns={
            "Burglary": "a burglary",
            "Earthquake": "an earthquake",
            "Alarm": "the alarm",
            "JohnCalls": "John's call",
            "MaryCalls": "Mary's call",
        },
        clauses={
            "Burglary": {"True": "a burglary happens", "False": "no burglary happens"},
            "Earthquake": {"True": "an earthquake happens", "False": "no earthquake happens"},
            "Alarm": {"True": "the alarm goes off", "False": "the alarm stays silent"},
            "JohnCalls": {"True": "John calls", "False": "John does not call"},
            "MaryCalls": {"True": "Mary calls", "False": "Mary does not call"},
        },
    ),
    "survey": Glossary(
        unit="respondent",
        nouns={
            "A": "age",
            "S": "sex",
            "E": "education",
            "O": "occupation",
            "R": "town size",
            "T": "means of transport",
        },
        clauses={
            "A": {
                "young": "the respondent is young",
                "adult": "the respondent is a middle-aged adult",
                "old": "the respondent is old",
            },
            "S": {"M": "the respondent is male", "F": "the respondent is female"},
            "E": {
                "high": "the respondent's highest education is high school",
                "uni": "the respondent has a university degree",
            },
            "O": {"emp": "the respondent is an employee", "self": "the respondent is self-employed"},
            "R": {
                "small": "the respondent lives in a small town",
                "big": "the respondent lives in a big city",
            },
            "T": {
                "car": "the respondent travels by car",
                "train": "the respondent travels by train",
                "other": "the respondent travels by other means",
            },
        },
    ),
    "sachs": Glossary(
        unit="cell",
        nouns={
            v: f"the {v} level"
            for v in ("Akt", "Erk", "Jnk", "Mek", "P38", "PIP2", "PIP3", "PKA", "PKC", "Plcg", "Raf")
        },
        clauses={
            v: {
                "LOW": f"the {v} level is low",
                "AVG": f"the {v} level is average",
                "HIGH": f"the {v} level is high",
            }
            for v in ("Akt", "Erk", "Jnk", "Mek", "P38", "PIP2", "PIP3", "PKA", "PKC", "Plcg", "Raf")
        },
    ),
    "child": Glossary(
        unit="newborn",
        nouns={
            "BirthAsphyxia": "birth asphyxia",
            "HypDistrib": "the hypoxia distribution",
            "HypoxiaInO2": "the hypoxia under oxygen",
            "CO2": "the blood CO2 level",
            "ChestXray": "the chest X-ray finding",
            "Grunting": "grunting",
            "LVHreport": "the reported left-ventricular hypertrophy",
            "LowerBodyO2": "the lower-body oxygen saturation",
            "RUQO2": "the right-upper-quadrant oxygen",
            "CO2Report": "the reported CO2 level",
            "XrayReport": "the reported X-ray finding",
            "Disease": "the underlying disease",
            "GruntingReport": "the reported grunting",
            "Age": "the age at presentation",
            "LVH": "left-ventricular hypertrophy",
            "DuctFlow": "the ductal flow",
            "CardiacMixing": "the cardiac mixing",
            "LungParench": "the lung parenchyma",
            "LungFlow": "the lung flow",
            "Sick": "sickness",
        },
        clauses={
            "BirthAsphyxia": _yes_no("the newborn", "had birth asphyxia", "did not have birth asphyxia"),
            "Grunting": _yes_no("the newborn", "is grunting", "is not grunting"),
            "GruntingReport": {"yes": "grunting is reported", "no": "no grunting is reported"},
            "LVH": _yes_no(
                "the newborn",
                "has left-ventricular hypertrophy",
                "does not have left-ventricular hypertrophy",
            ),
            "LVHreport": {
                "yes": "left-ventricular hypertrophy is reported",
                "no": "no left-ventricular hypertrophy is reported",
            },
            "Sick": _yes_no("the newborn", "is sick", "is not sick"),
            "Disease": {
                d: f"the underlying disease is {d}"
                for d in ("PFC", "TGA", "Fallot", "PAIVS", "TAPVD", "Lung")
            },
        },
    ),
    "kidney_stones": Glossary(
        unit="patient",
        nouns={"size": "the kidney-stone size", "treatment": "the treatment", "recovery": "recovery"},
        clauses={
            "size": {
                "small": "the patient's kidney stone is small",
                "large": "the patient's kidney stone is large",
            },
            "treatment": {
                "A": "the patient gets open surgery (treatment A)",
                "B": "the patient gets percutaneous nephrolithotomy (treatment B)",
            },
            "recovery": _yes_no(_PATIENT, "recovers", "does not recover"),
        },
    ),
    "firing_squad": Glossary(
        unit="execution",
        nouns={
            "court_order": "the court order",
            "nervous": "rifleman A's nervousness",
            "captain": "the captain's signal",
            "rifleman_a": "rifleman A's shot",
            "rifleman_b": "rifleman B's shot",
            "death": "the prisoner's death",
        },
        clauses={
            "court_order": {"yes": "the court orders the execution", "no": "the court does not order it"},
            "nervous": {"yes": "rifleman A is nervous", "no": "rifleman A is calm"},
            "captain": {"yes": "the captain gives the signal", "no": "the captain gives no signal"},
            "rifleman_a": {"yes": "rifleman A shoots", "no": "rifleman A does not shoot"},
            "rifleman_b": {"yes": "rifleman B shoots", "no": "rifleman B does not shoot"},
            "death": {"yes": "the prisoner dies", "no": "the prisoner survives"},
        },
    ),
}
"""Hand-written glossaries by network name."""


def glossary_for(name: str) -> Glossary:
    """The glossary of network ``name``; a generic one (``"the <var>"``, unit "case") otherwise."""
    return GLOSSARIES.get(name, Glossary())


def letters(variables: list[str]) -> dict[str, str]:
    """Single-letter symbols ``A, B, ...`` (then ``V27, V28, ...``) for the symbolic rendering."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return {v: alphabet[i] if i < 26 else f"V{i + 1}" for i, v in enumerate(variables)}


def nonsense_variables(
    n: int, cards: list[int], rng: np.random.Generator
) -> tuple[list[str], list[tuple[str, ...]]]:
    """``n`` distinct nonsense nouns and state names for variables with the given numbers of states."""
    if n > len(NONSENSE_NOUNS):
        raise ValueError(
            f"at most {len(NONSENSE_NOUNS)} variables are supported for random networks; got {n}."
        )
    names = [str(x) for x in rng.choice(NONSENSE_NOUNS, size=n, replace=False)]
    states = []
    for k in cards:
        options = STATE_WORDS.get(k) or (tuple(f"s{i}" for i in range(k)),)
        states.append(options[int(rng.integers(len(options)))])
    return names, states
