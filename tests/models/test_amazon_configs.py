"""The Amazon (S3-Rec) configs: each validates against the schema and uses the published tables' protocol."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recframe.cli import main

AMAZON = Path(__file__).resolve().parents[2] / "configs" / "amazon"
CONFIGS = sorted(p.name for p in AMAZON.glob("*.yaml"))


def test_every_model_has_a_config_per_dataset() -> None:
    for model in ("popularity", "bprmf", "lightgcn", "gru4rec", "bert4rec"):
        for dataset in ("beauty", "sports", "toys"):
            assert f"{model}_{dataset}.yaml" in CONFIGS


@pytest.mark.parametrize("config", CONFIGS)
def test_config_uses_the_published_protocol_on_its_dataset(config: str) -> None:
    data = yaml.safe_load((AMAZON / config).read_text())["data"]
    dataset = config.removesuffix(".yaml").rsplit("_", 1)[1]
    assert data["dataset"] == f"amazon-{dataset}"
    assert data["split"] == "loo" and data["max_len"] == 50  # leave-one-out, the tables' 50 items of history
    assert {5, 10, 20} <= set(data["eval_ks"])  # HR/NDCG@5/10/20


@pytest.mark.parametrize("config", CONFIGS)
def test_config_validates_against_the_schema(config: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:  # --print_config validates and exits before touching data
        main(["fit", "--config", str(AMAZON / config), "--print_config"])
    assert exc.value.code in (0, None)
    assert "class_path: recframe.models." in capsys.readouterr().out


# ---------------------------------------------------------------- the generative rows (issue 34 item 3)
GENERATIVE = ("tiger", "tiger_collab", "tiger_hybrid", "tiger_collab_trierec", "tiger_collab_trierec_same",
              "tiger_collab_rgrec", "decoder_collab", "flash", "flash_collab")
DATASETS = ("beauty", "sports", "toys")


def _init(config: str) -> dict:
    return yaml.safe_load((AMAZON / config).read_text())["model"]["init_args"]


def test_every_generative_row_of_the_benchmark_has_a_config_per_dataset() -> None:
    from benchmarks.amazon import ROWS

    stems = {row.stem for row in ROWS.values() if row.generative}
    assert stems == set(GENERATIVE)
    for stem in GENERATIVE:
        for dataset in DATASETS:
            assert f"{stem}_{dataset}.yaml" in CONFIGS


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("stem", GENERATIVE)
def test_generative_config_ids_addons_and_validation(stem: str, dataset: str) -> None:
    config = f"{stem}_{dataset}.yaml"
    text = (AMAZON / config).read_text()
    init = _init(config)
    assert "fixed before any run" in text and "one point" in text  # the recipe is written down, not searched
    if "collab" in stem or "hybrid" in stem:  # SASRec's item table on the same dataset's split (hybrid: with
        # the attribute multi-hot as the content block)
        assert init["features"] == ("hybrid" if "hybrid" in stem else "collaborative")
        assert init.get("hybrid_content") == ("none" if "hybrid" in stem else None)
        assert init["collaborative"] == f"configs/amazon/sasrec_{dataset}.yaml"
        assert (AMAZON.parents[1] / init["collaborative"]).is_file()
    else:  # attribute IDs: the multi-hot metadata features (no item text exists on these data)
        assert init["features"] == "none"
    addons = [a["class_path"].rsplit(".", 1)[1] for a in init.get("addons") or []]
    assert addons == {"tiger_collab_trierec": ["TrieRec"], "tiger_collab_trierec_same": ["TrieRec"],
                      "tiger_collab_rgrec": ["RGRec"]}.get(stem, [])
    if stem.startswith("flash"):
        assert init["tokenizer"]["class_path"].endswith("SimHashTokenizer")
    else:  # every validation user ranked by beam search; the test is exact
        assert init["tokenizer"]["class_path"].endswith("RQKMeansTokenizer")
        assert init["validation_decode"] == "beam" and init["validation_beam"] == 50


@pytest.mark.parametrize("dataset", DATASETS)
def test_add_on_rows_share_the_backbone_where_the_comment_says_so(dataset: str) -> None:
    base = _init(f"tiger_collab_{dataset}.yaml")
    # R-GRec on/off, and TrieRec on/off at TIGER's settings, differ by the add-on only
    for stem in ("tiger_collab_rgrec", "tiger_collab_trierec_same"):
        assert {k: v for k, v in _init(f"{stem}_{dataset}.yaml").items() if k != "addons"} == base
    whole = [yaml.safe_load((AMAZON / f"{stem}_{dataset}.yaml").read_text())
             for stem in ("tiger_collab", "tiger_collab_trierec_same")]
    for config in whole:
        config["model"]["init_args"].pop("addons", None)
        config["trainer"].pop("logger")
    assert whole[0] == whole[1]
    # the hybrid row differs from the collaborative one in its item source alone
    hybrid = yaml.safe_load((AMAZON / f"tiger_hybrid_{dataset}.yaml").read_text())
    collab = yaml.safe_load((AMAZON / f"tiger_collab_{dataset}.yaml").read_text())
    for config in (hybrid, collab):
        config["model"]["init_args"].pop("hybrid_content", None)
        config["model"]["init_args"].pop("features")
        config["trainer"].pop("logger")
    assert hybrid == collab
    # the TrieRec row at its own ML-100K-tuned settings differs in width and learning rate too
    own = _init(f"tiger_collab_trierec_{dataset}.yaml")
    assert {k for k in base if own.get(k) != base[k]} == {"dim", "inner", "lr"}
    sasrec = yaml.safe_load((AMAZON / f"sasrec_{dataset}.yaml").read_text())
    flash = _init(f"flash_{dataset}.yaml")
    # FLASH takes SASRec's transformer recipe on the same data
    for key in ("dropout", "attn_dropout", "lr", "n_layers", "n_heads", "inner"):
        assert flash[key] == sasrec["model"]["init_args"][key]
    assert flash["dim"] == sasrec["model"]["init_args"]["hidden"]
    # FLASH on collaborative IDs differs from FLASH on attribute IDs in the item source alone
    collab = _init(f"flash_collab_{dataset}.yaml")
    source = ("features", "collaborative", "collaborative_seed")
    assert {k: v for k, v in collab.items() if k not in source} == {k: v for k, v in flash.items()
                                                                    if k not in source}
    whole = [yaml.safe_load((AMAZON / f"{stem}_{dataset}.yaml").read_text())
             for stem in ("flash", "flash_collab")]
    for config in whole:
        config.pop("model")
        config["trainer"].pop("logger")
    assert whole[0] == whole[1]


def test_attribute_features_are_the_multi_hot_of_the_s3rec_attributes(tmp_path: Path) -> None:
    """`features: none` on S3-Rec data gives the tokenizer each item's attribute set (unit-norm multi-hot)."""
    import numpy as np

    from recframe.data.datamodule import load_source
    from recframe.data.s3rec_format import convert_s3rec
    from recframe.features import item_content_features

    sequences = b"1 10 11 12\n2 11 12 13\n3 10 13 12\n"
    attributes = b'{"10": [1, 2], "11": [2], "12": [1, 2, 3], "13": [3, 3]}'
    folder = tmp_path / "tiny"
    folder.mkdir()
    files = convert_s3rec(sequences, attributes, name="tiny", labels=("Tiny.txt", "a.json"))
    for name, blob in files.items():
        (folder / name).write_bytes(blob)
    inter = load_source(str(folder), str(tmp_path), None, None)
    features = item_content_features(inter.item_features, encoder="none")
    dense = {str(raw): i for i, raw in enumerate(inter.item_ids) if i > 0}
    want = {"10": {1, 2}, "11": {2}, "12": {1, 2, 3}, "13": {3}}
    assert features.shape == (inter.n_items + 1, 3) and not features[0].any()
    for raw, attrs in want.items():
        row = features[dense[raw]]
        hot = {j + 1 for j in np.flatnonzero(row)}  # columns are the attributes a1, a2, a3 in name order
        assert hot == attrs
        np.testing.assert_allclose(row[row > 0], 1 / np.sqrt(len(attrs)), rtol=1e-6)


def test_the_scalable_loss_row_differs_from_sasrec_in_the_loss_alone() -> None:
    """Issue 32's paired interval on Beauty measures the loss: every other setting equals the SASRec row's."""
    from benchmarks.amazon import ROWS

    assert ROWS["SASRec (sampled softmax, logQ)"].stem == "sasrec_logq"
    full = yaml.safe_load((AMAZON / "sasrec_beauty.yaml").read_text())
    logq = yaml.safe_load((AMAZON / "sasrec_logq_beauty.yaml").read_text())
    assert logq["model"]["init_args"].pop("loss_type") == "sampled_logq"
    assert logq["model"]["init_args"].pop("n_negatives") == 256
    assert full["model"]["init_args"].pop("loss_type") == "ce"
    logq["trainer"]["logger"]["init_args"].pop("name")
    full["trainer"]["logger"]["init_args"].pop("name")
    assert logq == full


def test_finished_sasrec_runs_are_adopted_for_pending_collaborative_seeds(tmp_path, monkeypatch) -> None:
    """Only a seed that a pending collaborative job needs, with a finished SASRec run of this table's config
    and its checkpoint on disk, is adopted."""
    import json

    import recframe.features as features
    from benchmarks import amazon

    monkeypatch.setattr(amazon, "folder", lambda dataset: tmp_path)
    ckpt = tmp_path / "best.ckpt"
    ckpt.write_bytes(b"x")
    for seed in (0, 1, 2):
        (tmp_path / f"SASRec__seed{seed}.json").write_text(json.dumps({
            "config": "configs/amazon/sasrec_beauty.yaml" if seed != 2 else "configs/amazon/other.yaml",
            "best_checkpoint": str(ckpt), "valid": {"ndcg@10": 0.07}, "epochs": 40, "train_seconds": 9.0}))
    (tmp_path / "TIGER__collaborative_IDs__seed1.json").write_text("{}")  # seed 1 finished already
    calls = []
    monkeypatch.setattr(features, "adopt_item_table", lambda config, checkpoint, seed, run_info:
                        calls.append((Path(config).name, seed, run_info["epochs"])))
    jobs = [("TIGER (collaborative IDs)", s) for s in (0, 1, 2, 3)] + [("TIGER (attribute IDs)", 4)]
    assert amazon.adopt_sasrec_tables("beauty", jobs) == [0]
    assert calls == [("sasrec_beauty.yaml", 0, 40)]


def test_kept_sasrec_tables_are_exported_once_and_imported_for_pending_seeds(tmp_path, monkeypatch) -> None:
    """A cached SASRec table is kept in the table's folder once; a new checkout (no checkpoint, no cache)
    imports the kept table of a pending collaborative seed instead of retraining SASRec."""
    import numpy as np

    import recframe.features.collaborative as co
    from benchmarks import amazon

    monkeypatch.setattr(amazon, "folder", lambda dataset: tmp_path / "results")
    cached = tmp_path / "cache" / "key.npy"
    cached.parent.mkdir()
    np.save(cached, np.zeros((3, 2), np.float32))
    cached.with_suffix(".json").write_text("{}")
    monkeypatch.setattr(co, "stored_tables", lambda config: {1: cached})
    assert amazon.keep_sasrec_tables("toys") == [1]
    assert amazon.keep_sasrec_tables("toys") == []  # already kept
    kept = tmp_path / "results" / "item_tables" / "SASRec__seed1.npy"
    assert kept.is_file() and kept.with_suffix(".json").read_text() == "{}"
    imported = []
    monkeypatch.setattr(co, "import_item_table", lambda config, stored: imported.append(
        (Path(config).name, Path(stored).name)))
    jobs = [("FLASH (collaborative IDs)", s) for s in (0, 1)]
    assert amazon.adopt_sasrec_tables("toys", jobs) == [1]
    assert imported == [("sasrec_toys.yaml", "SASRec__seed1.npy")]


def test_the_plot_draws_our_rows_beside_the_published_ones(tmp_path) -> None:
    from benchmarks import amazon

    summary = {"SASRec": {"ndcg@10": (0.056, 0.001)}, "Popularity": {"ndcg@10": (0.005, 0.0)}}
    path = amazon.plot("beauty", summary, tmp_path / "beauty.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
