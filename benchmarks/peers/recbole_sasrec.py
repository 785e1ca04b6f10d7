"""RecBole 1.2.1 side of ``benchmarks/train_vs_recbole.py``: train SASRec epoch by epoch, evaluate after each.

Runs inside the peer venv ``benchmarks/.venvs/recbole`` (built by the benchmark with
:mod:`benchmarks.peer_env`), never in the project environment, so it imports nothing from
recframe. Usage::

    python recbole_sasrec.py SPEC.json

``SPEC.json`` holds ``data_root`` (folder with ``ml-100k/ml-100k.inter``), ``dataset``,
``recbole_config`` (RecBole config keys, translated from our YAML by the benchmark),
``budget_seconds``, ``max_epochs``, ``patience_epochs``, ``threads``, ``seed`` and ``workdir``.
Progress goes to stderr; the last stdout line is one JSON object with the data summary, the
per-epoch curve and the peak memory.

What happens, and why:

* The loop is RecBole's own ``Trainer.fit`` loop written out: ``Trainer._train_epoch`` is timed
  (the training clock, data loading included), then RecBole's ``Trainer.evaluate`` (its Collector
  and Evaluator) scores validation and test with the current weights. Evaluating test after
  every epoch means no checkpoint is ever written or reloaded, so RecBole's ``torch.load`` of its
  own checkpoints (which torch>=2.6 would refuse with ``weights_only=True``) is never called and
  needs no patch here.
* RecBole's full-sort loader for *sequential* models does not mask the user's seen items
  (``FullSortEvalDataLoader.collate_fn`` returns ``history_index=None``). Every stage is
  therefore evaluated twice with RecBole's evaluator: ``unmasked`` (RecBole's own protocol) and
  ``masked``, where a wrapped ``collate_fn`` supplies the seen items (validation: training items;
  test: training + validation items; a held-out target is never masked), which is recframe's
  protocol. RecBole's code is not edited; the wrapper is assigned to the loader instance.
* RecBole's ``Config`` also parses ``--key=value`` from the command line, so the spec is a file
  and ``sys.argv`` is cleared before the config is built. RecBole writes ``log_tensorboard/`` and
  ``saved/`` under the working directory, so the script changes into ``workdir`` first.
* RecBole converts float fields to float32 tensors before it sorts by time. ML-100K's timestamps
  (min-max normalised by RecBole's ``ml-100k`` defaults) then lose sub-second resolution, the
  resulting ties fall back to file order, and on the unpatched run 5 validation and 4 test
  targets (38 and 37 users' input sequences) differed from the exact chronological order that recframe
  (float64) uses. :func:`keep_time_float64` keeps the time field in float64, so both sides sort
  the same values; RecBole's stable sort and everything else are unchanged.
* ``recbole.quick_start`` is not imported: it imports ray, whose import needs ``pkg_resources``,
  which the current setuptools (pulled in by the torch 2.13 wheel's ``setuptools>=77``) no longer
  ships. Nothing else this script uses needs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

METRIC_NAMES = {"recall": "recall", "ndcg": "ndcg", "hit": "hr"}


def log(message: str) -> None:
    """One progress line on stderr."""
    print(f"[recbole] {message}", file=sys.stderr, flush=True)


def digest(lines: list[str]) -> str:
    """Order-independent sha256 (first 16 hex digits) of a list of text lines."""
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


class HistoryMask:
    """``collate_fn`` wrapper that adds the seen-item mask to RecBole's sequential full-sort batches.

    ``seen`` is a boolean ``[user_num, item_num]`` matrix; when ``enabled`` the batch's
    ``history_index`` becomes the (row, item) pairs of the seen items of each row's user, minus
    the row's own target, which ``Trainer._full_sort_batch_eval`` sets to ``-inf``.
    """

    def __init__(self, collate: Any, seen: Any, uid_field: str) -> None:
        self.collate, self.seen, self.uid_field = collate, seen, uid_field
        self.enabled = False

    def __call__(self, index: Any) -> tuple[Any, Any, Any, Any]:
        import torch

        interaction, history, positive_u, positive_i = self.collate(index)
        if not self.enabled:
            return interaction, history, positive_u, positive_i
        rows = self.seen[interaction[self.uid_field]].clone()
        rows[positive_u, positive_i] = False
        rows[:, 0] = False
        hist_u, hist_i = torch.nonzero(rows, as_tuple=True)
        return interaction, (hist_u, hist_i), positive_u, positive_i


def seen_matrix(dataset: Any, user_num: int, item_num: int, list_field: str) -> Any:
    """Boolean ``[user_num, item_num]``: items of the users' rows in an augmented sequential dataset.

    Each row holds a target item and its prefix (``item_id_list``); the union over a user's rows
    is every item of the user's part of the split.
    """
    import torch

    feat = dataset.inter_feat
    uid, iid = feat[dataset.uid_field], feat[dataset.iid_field]
    seen = torch.zeros(user_num, item_num, dtype=torch.bool)
    seen[uid, iid] = True
    seqs = feat[list_field]
    seen[uid[:, None].expand_as(seqs), seqs] = True
    seen[:, 0] = False
    return seen


def keep_time_float64() -> None:
    """Patch ``Dataset._dataframe_to_interaction`` to keep the time field in float64 (see module doc)."""
    import torch
    from recbole.data.dataset import Dataset

    original = Dataset._dataframe_to_interaction
    if getattr(original, "keeps_time_float64", False):
        return

    def convert(self: Any, data: Any) -> Any:
        inter = original(self, data)
        field = self.time_field
        if field is not None and field in data and field in inter.interaction:
            inter.interaction[field] = torch.from_numpy(data[field].to_numpy(dtype="float64"))
        return inter

    convert.keeps_time_float64 = True  # type: ignore[attr-defined]
    Dataset._dataframe_to_interaction = convert


def data_summary(datasets: dict[str, Any], list_field: str, length_field: str) -> dict[str, Any]:
    """Counts and raw-id digests that the benchmark compares with recframe's split."""
    train = datasets["train"]
    out: dict[str, Any] = {"n_users": train.user_num - 1, "n_items": train.item_num - 1,
                           "n_train_targets": len(train)}
    for stage, ds in datasets.items():
        feat = ds.inter_feat
        users = ds.id2token(ds.uid_field, feat[ds.uid_field].numpy())
        items = ds.id2token(ds.iid_field, feat[ds.iid_field].numpy())
        pairs = [f"{u}\t{i}" for u, i in zip(users, items)]
        out[f"{stage}_targets_digest"] = digest(pairs)
        if stage != "train":
            out[f"{stage}_targets"] = sorted([str(u), str(i)] for u, i in zip(users, items))
            lengths = feat[length_field].numpy()
            seqs = feat[list_field].numpy()
            inputs = {}
            for u, seq, n in zip(users, seqs, lengths):
                tokens = ds.id2token(ds.iid_field, seq[:n])
                inputs[str(u)] = hashlib.sha256(" ".join(map(str, tokens)).encode()).hexdigest()[:12]
            out[f"{stage}_input_digests"] = inputs
    return out


def evaluate(trainer: Any, loader: Any, mask: HistoryMask, masked: bool) -> dict[str, float]:
    """RecBole's evaluator on ``loader`` with the current weights; keys like ``ndcg@10``."""
    mask.enabled = masked
    result = trainer.evaluate(loader, load_best_model=False, show_progress=False)
    out = {}
    for key, value in result.items():
        name, k = key.split("@")
        out[f"{METRIC_NAMES.get(name, name)}@{k}"] = float(value)
    return out


def per_user_ranks(trainer: Any, loader: Any, mask: HistoryMask, dataset: Any, k: int = 10) -> dict[str, int]:
    """0-based test rank per raw user id, capped at ``k`` (= not in the top k), seen items masked, from the
    scores RecBole's evaluator ranks (``Trainer._full_sort_batch_eval``); ties count pessimistically, as
    recframe counts them (float scores make ties rare). Leave-one-out: one target per row."""
    import torch

    mask.enabled = True
    trainer.model.eval()
    out: dict[str, int] = {}
    with torch.no_grad():
        for batched in loader:
            interaction, scores, positive_u, positive_i = trainer._full_sort_batch_eval(batched)
            target = scores[positive_u, positive_i]
            ranks = (scores[positive_u] >= target[:, None]).sum(dim=1) - 1
            users = dataset.id2token(dataset.uid_field, interaction[dataset.uid_field][positive_u].numpy())
            for user, rank in zip(users.tolist(), ranks.tolist()):
                out[str(user)] = min(int(rank), k)
    return out


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    sys.argv = sys.argv[:1]  # RecBole's Config would read --key=value arguments
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)

    import numpy as np
    import torch

    threads = int(spec["threads"])
    torch.set_num_threads(threads)
    data_root = Path(spec["data_root"]).resolve()
    dataset_name = spec["dataset"]
    inter = data_root / dataset_name / f"{dataset_name}.inter"
    if not inter.is_file():
        raise SystemExit(f"{inter} not found: run `recframe data prepare {dataset_name}` first "
                         "(RecBole would otherwise try to download it).")
    workdir = Path(spec["workdir"]).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)

    import recbole
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_model, get_trainer, init_seed

    config_dict = {**spec["recbole_config"], "data_path": str(data_root), "seed": int(spec["seed"]),
                   "reproducibility": True, "use_gpu": False, "show_progress": False,
                   "checkpoint_dir": str(workdir / "saved"), "epochs": int(spec["max_epochs"]),
                   "metric_decimal_place": 8, "worker": 0}
    keep_time_float64()
    t0 = time.perf_counter()
    config = Config(model="SASRec", dataset=dataset_name, config_dict=config_dict)
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    init_seed(config["seed"], config["reproducibility"])
    model = get_model(config["model"])(config, train_data._dataset).to(config["device"])
    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    setup_seconds = time.perf_counter() - t0

    list_field = config["ITEM_ID_FIELD"] + config["LIST_SUFFIX"]
    length_field = config["ITEM_LIST_LENGTH_FIELD"]
    user_num, item_num = dataset.user_num, dataset.item_num
    seen_valid = seen_matrix(train_data.dataset, user_num, item_num, list_field)
    seen_test = seen_valid.clone()
    vfeat = valid_data.dataset.inter_feat
    seen_test[vfeat[dataset.uid_field], vfeat[dataset.iid_field]] = True
    masks = {}
    for name, loader, seen in (("valid", valid_data, seen_valid), ("test", test_data, seen_test)):
        masks[name] = HistoryMask(loader.collate_fn, seen, dataset.uid_field)
        loader.collate_fn = masks[name]
    data = data_summary({"train": train_data.dataset, "valid": valid_data.dataset,
                         "test": test_data.dataset}, list_field, length_field)
    data["train_batches_per_epoch"] = len(train_data)
    log(f"setup {setup_seconds:.1f}s: {data['n_users']} users, {data['n_items']} items, "
        f"{data['n_train_targets']} training samples, {len(train_data)} batches per epoch")

    budget = float(spec["budget_seconds"])
    patience = int(spec["patience_epochs"])
    trainer.eval_collector.data_collect(train_data)  # as Trainer.fit does
    epochs: list[dict[str, Any]] = []
    cum = 0.0
    best, since_best = -np.inf, 0
    stopped = "max_epochs"
    for epoch in range(int(spec["max_epochs"])):
        start = time.perf_counter()
        loss = trainer._train_epoch(train_data, epoch, show_progress=False)
        seconds = time.perf_counter() - start
        cum += seconds
        ev_start = time.perf_counter()
        row: dict[str, Any] = {"epoch": epoch + 1, "train_seconds": seconds, "cum_train_seconds": cum,
                               "loss": float(loss) / len(train_data)}
        for stage, loader in (("valid", valid_data), ("test", test_data)):
            row[stage] = {"masked": evaluate(trainer, loader, masks[stage], True),
                          "unmasked": evaluate(trainer, loader, masks[stage], False)}
        row["test_rank_per_user"] = per_user_ranks(trainer, test_data, masks["test"], dataset)
        row["eval_seconds"] = time.perf_counter() - ev_start
        epochs.append(row)
        score = row["valid"]["masked"]["ndcg@10"]
        log(f"epoch {epoch + 1}: train {seconds:.1f}s (total {cum:.1f}s), loss {row['loss']:.4f}, "
            f"valid ndcg@10 {score:.4f}, test ndcg@10 {row['test']['masked']['ndcg@10']:.4f}")
        if score > best:
            best, since_best = score, 0
        else:
            since_best += 1
        if since_best >= patience:
            stopped = f"early stopping ({patience} epochs without a better validation NDCG@10)"
            break
        if cum + seconds > budget:
            stopped = "budget (the next epoch would overrun it)"
            break

    print(json.dumps({
        "library": "RecBole", "version": recbole.__version__, "torch": torch.__version__,
        "numpy": np.__version__, "threads": torch.get_num_threads(), "setup_seconds": setup_seconds,
        "data": data, "epochs": epochs, "stopped": stopped,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "resolved_config": {k: config[k] for k in sorted(spec["recbole_config"])},
    }, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
