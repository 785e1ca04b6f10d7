"""The release validator names file, line and field of every error; valid releases load as is."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recframe.conversational.generator import generate
from recframe.conversational.loader import load_release, write_release
from recframe.conversational.validate import ReleaseError, validate_release
from recframe.data.interactions import DataError
from tests.conversational.fixtures import tiny_release


def _write(folder: Path) -> Path:
    write_release(tiny_release(), folder)
    return folder


def _rewrite(path: Path, line: int, mutate) -> None:  # noqa: ANN001
    lines = path.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[line - 1])
    mutate(obj)
    lines[line - 1] = json.dumps(obj, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _where(issues) -> set[tuple[str, int, str]]:  # noqa: ANN001
    return {(i.file, i.line, i.field) for i in issues}


def test_tiny_release_round_trips(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    assert validate_release(folder) == []
    loaded = load_release(folder)
    assert loaded.dialogues == tiny_release().dialogues
    assert loaded.pois == tiny_release().pois and loaded.lexicon == tiny_release().lexicon


def test_generated_release_is_valid(tmp_path: Path) -> None:
    release, _ = generate(n_dialogues=30, n_pois=120, n_cities=2, seed=3)
    write_release(release, tmp_path)
    assert validate_release(tmp_path) == []
    assert len(load_release(tmp_path).dialogues) == 30


@pytest.mark.parametrize(
    "file, line, mutate, field",
    [
        ("pois.jsonl", 2, lambda o: o.pop("name"), "name"),
        ("pois.jsonl", 1, lambda o: o.update(lat=123.0), "lat"),
        ("pois.jsonl", 3, lambda o: o.update(lon="west"), "lon"),
        ("pois.jsonl", 1, lambda o: o.update(attributes={"price": [1, 2]}), "attributes.price"),
        ("reviews.jsonl", 2, lambda o: o.update(poi_id="Z"), "poi_id"),
        ("reviews.jsonl", 4, lambda o: o.update(text=""), "text"),
        ("reviews.jsonl", 5, lambda o: o.update(review_id="rA1"), "review_id"),  # duplicate id
        ("dialogues.jsonl", 1, lambda o: o.update(target="Z"), "target"),
        ("dialogues.jsonl", 1, lambda o: o["candidates"].append("Q"), "candidates[3]"),
        ("dialogues.jsonl", 1, lambda o: o["turns"][0].update(act="recommend"), "turns[0].act"),
        (
            "dialogues.jsonl",
            1,
            lambda o: o["turns"][0].update(act="reject"),
            "turns[0].act",
        ),  # follows nothing
        ("dialogues.jsonl", 1, lambda o: o["turns"][4].update(role="system"), "turns[4].act"),
        ("dialogues.jsonl", 1, lambda o: o["turns"][1].update(poi_id="Z"), "turns[1].poi_id"),
        (
            "dialogues.jsonl",
            1,
            lambda o: o["turns"][1]["citations"][0].update(text="The THAI curry is good."),
            "turns[1].citations[0].text",
        ),
        (
            "dialogues.jsonl",
            1,
            lambda o: o["turns"][3]["citations"][0].update(
                review_id="rB1", start=0, end=13, text="It is pricey."
            ),
            "turns[3].citations[0].review_id",
        ),
        (
            "dialogues.jsonl",
            1,
            lambda o: o["turns"][3]["citations"][0].update(end=99),
            "turns[3].citations[0].end",
        ),
        (
            "dialogues.jsonl",
            1,
            lambda o: o["turns"][3]["citations"][0].update(start=-1),
            "turns[3].citations[0].start",
        ),
        ("dialogues.jsonl", 1, lambda o: o["turns"][0].update(aspects={"price": 3}), "turns[0].aspects"),
    ],
)
def test_each_error_names_file_line_and_field(
    tmp_path: Path, file: str, line: int, mutate, field: str
) -> None:  # noqa: ANN001
    folder = _write(tmp_path)
    _rewrite(folder / file, line, mutate)
    issues = validate_release(folder)
    assert (file, line, field) in _where(issues), [str(i) for i in issues]
    with pytest.raises(ReleaseError, match=re.escape(f"{file}:{line}: {field}:")):
        load_release(folder)


def test_citation_without_offsets_uses_the_verbatim_rule(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    # NFD and a non-breaking space: verbatim under the rule, accepted without offsets
    _rewrite(
        folder / "dialogues.jsonl",
        1,
        lambda o: o["turns"][3]["citations"].__setitem__(
            0, {"review_id": "rA1", "text": "Prices\u00a0are cheap  here."}
        ),
    )
    assert validate_release(folder) == []


def test_bad_json_line_and_missing_file(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    with open(folder / "reviews.jsonl", "a", encoding="utf-8") as fh:
        fh.write("\n{not json\n")
    assert ("reviews.jsonl", 7, "<json>") in _where(validate_release(folder))
    (folder / "pois.jsonl").unlink()
    assert _where(validate_release(folder)) == {("pois.jsonl", 0, "<file>")}


def test_every_error_is_reported_and_release_error_is_a_data_error(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    _rewrite(folder / "pois.jsonl", 1, lambda o: o.pop("city"))
    _rewrite(folder / "dialogues.jsonl", 1, lambda o: o.update(city=""))
    with pytest.raises(DataError) as info:
        load_release(folder)
    assert isinstance(info.value, ReleaseError)
    assert {("pois.jsonl", 1, "city"), ("dialogues.jsonl", 1, "city")} <= _where(info.value.issues)


def test_yelp_field_names_load(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    for name, rename in (
        ("pois.jsonl", {"poi_id": "business_id", "lat": "latitude", "lon": "longitude"}),
        ("reviews.jsonl", {"poi_id": "business_id"}),
    ):
        rows = [json.loads(x) for x in (folder / name).read_text(encoding="utf-8").splitlines()]
        rows = [{rename.get(k, k): v for k, v in r.items()} for r in rows]
        if name == "pois.jsonl":
            for r in rows:
                r["categories"] = ", ".join(r["categories"])
                r["attributes"]["parking"] = None
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    loaded = load_release(folder)
    assert loaded.pois["A"].categories == ("Restaurants", "Thai")
    assert "parking" not in loaded.pois["A"].attributes and loaded.reviews["rA1"].poi_id == "A"


def test_lexicon_errors(tmp_path: Path) -> None:
    folder = _write(tmp_path)
    (folder / "lexicon.json").write_text('{"price": {"cheap": "cheap"}}')
    assert ("lexicon.json", 0, "price.cheap") in _where(validate_release(folder))
    (folder / "lexicon.json").write_text("{oops")
    assert ("lexicon.json", 1, "<json>") in _where(validate_release(folder))
