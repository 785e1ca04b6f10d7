"""One unlearning comparison: load the trained model and its data, run every method, report.

:func:`run_unlearning` is what ``recframe unlearn`` and ``benchmarks/ml100k_unlearning.py`` call. Methods
(each optional; their settings as in the config, see :mod:`recframe.unlearning`):

* ``retrain`` (:mod:`~recframe.unlearning.retrain`) — the gold reference; the distance column needs it;
* ``ga``, ``npo`` (:mod:`~recframe.unlearning.methods`);
* ``suppression`` (:mod:`~recframe.unlearning.suppression`);
* ``tracer`` (:mod:`~recframe.unlearning.tracer`).

Every model is scored exactly (full catalogue) on the original data's test cases
(:mod:`~recframe.unlearning.metrics`); the ``original`` row is the model before unlearning.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import yaml

from recframe.checkpoint_io import CheckpointError, atomic_write, best_checkpoint, load_checkpoint
from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import DataError
from recframe.unlearning.concepts import Concept
from recframe.unlearning.methods import FinetuneSettings, NPOSettings, run_ga, run_npo
from recframe.unlearning.metrics import UnlearningMetrics, evaluate_unlearning
from recframe.unlearning.objectives import Examples
from recframe.unlearning.retrain import RetrainSettings, retrain_without
from recframe.unlearning.settings import METHOD_ORDER, MethodSettings, method_kind, parse_methods
from recframe.unlearning.suppression import (
    SuppressionSettings,
    suppressed_items,
    suppressed_prefixes,
    with_suppression,
)
from recframe.unlearning.tracer import TracerSettings, run_tracer

__all__ = [
    "METHOD_ORDER",
    "data_settings",
    "evaluate_stages",
    "forget_mask",
    "load_generative",
    "method_kind",
    "per_user_retain",
    "run_unlearning",
    "save_unlearned",
    "stage_rows",
    "test_batches",
]

def load_generative(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """A generative model and its checkpoint dict from a ``recframe fit`` checkpoint (``weights_only``); a run
    folder (``runs/<name>``) means its best-validation checkpoint
    (:func:`recframe.checkpoint_io.best_checkpoint`)."""
    path = best_checkpoint(path)
    ckpt = load_checkpoint(path)
    meta = ckpt.get("recframe") or {}
    class_path = meta.get("model_class")
    if not class_path or "state_dict" not in ckpt:
        raise CheckpointError(
            f"checkpoint {path} has no recframe metadata (model class); pass a checkpoint "
            "written by `recframe fit` of a generative model (TIGER or SIDDecoder)."
        )
    module, _, name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    from recframe.models.generative.models import GenerativeRecModel

    if not issubclass(cls, GenerativeRecModel):
        raise CheckpointError(
            f"checkpoint {path} holds a {name}; concept unlearning needs a generative "
            "semantic-ID model (recframe.models.generative.TIGER or SIDDecoder)."
        )
    hparams = {k: v for k, v in (ckpt.get("hyper_parameters") or {}).items() if not k.startswith("_")}
    model = cls(**hparams)
    model.load_state_dict(ckpt["state_dict"])
    model.sid_table_state = ckpt.get("sid_table")
    return model.eval(), ckpt


def data_settings(ckpt: dict[str, Any], override: dict[str, Any] | None = None) -> dict[str, Any]:
    """The :class:`RecDataModule` arguments of the run that wrote ``ckpt`` (its stored config's ``data:``),
    updated with ``override``."""
    text = (ckpt.get("recframe") or {}).get("config") or ""
    stored = yaml.safe_load(text) if text else {}
    data = dict((stored or {}).get("data") or {})
    data.update(override or {})
    if "dataset" not in data:
        raise DataError(
            "the checkpoint stores no data settings; give them under data: in the unlearning "
            "config (e.g. data: {dataset: ml-100k, split: loo, max_len: 50})."
        )
    return data


def forget_mask(concept: Concept, dm: RecDataModule) -> np.ndarray:
    """The concept's items on ``dm``'s training split; refuses a concept that holds for none or all."""
    mask = concept.mask(dm.split.train.item_features, dm.n_items)
    n = int(mask.sum())
    if n == 0:
        feats = dm.split.train.item_features
        genres = sorted({g for c in (feats.categories or []) for g in (c or ())})
        raise DataError(
            f"concept {concept.text!r} holds for no item of {dm.dataset}; check the value "
            f"(genres here: {', '.join(genres[:30])})."
        )
    if n == dm.n_items:
        raise DataError(f"concept {concept.text!r} holds for every item; nothing would be retained.")
    return mask


def test_batches(
    dm: RecDataModule, batch_size: int = 256, stage: Literal["valid", "test"] = "test"
) -> Iterator[dict[str, torch.Tensor]]:
    """The test (or validation) cases of ``dm`` in user chunks, as the evaluator receives them."""
    es = dm.eval_set(stage)
    for start in range(0, len(es.users), batch_size):
        yield es.batch(list(range(start, min(start + batch_size, len(es.users)))), dm.max_len)


def evaluate_stages(
    model: Any,
    dm: RecDataModule,
    forget: np.ndarray,
    batch_size: int,
    stages: tuple[Literal["valid", "test"], ...] = ("test",),
) -> dict[str, UnlearningMetrics]:
    """``model``'s unlearning metrics on each of ``stages`` of ``dm`` (exact full-catalogue scores)."""
    model.eval()
    return {
        stage: evaluate_unlearning(
            lambda b: model.score({"history": b["history"]}), test_batches(dm, batch_size, stage), forget
        )
        for stage in stages
    }


def stage_rows(
    results: dict[str, tuple[dict[str, UnlearningMetrics], float]], stages: tuple[str, ...]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per stage, every model's report row: ``results`` maps a name to its metrics by stage and its seconds;
    it must hold ``original`` and may hold ``retrain`` (the distance column's reference)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage in stages:
        original = results["original"][0][stage]
        retrain = results["retrain"][0][stage] if "retrain" in results else None
        out[stage] = {
            name: {**metrics[stage].row(original, retrain), "seconds": round(seconds, 1)}
            for name, (metrics, seconds) in results.items()
        }
    return out


def save_unlearned(model: Any, ckpt: dict[str, Any], path: str | Path, info: dict[str, Any]) -> Path:
    """A checkpoint of an unlearned model: the original's metadata and serving data, the new weights,
    hyperparameters (add-ons included) and SID table, and ``unlearning`` (what was done)."""
    out = {
        k: v for k, v in ckpt.items() if k not in ("optimizer_states", "lr_schedulers", "callbacks", "loops")
    }
    out["state_dict"] = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    out["hyper_parameters"] = {k: v for k, v in model.hparams.items()}
    if model.sid_table_state is not None:
        out["sid_table"] = model.sid_table_state
    out["unlearning"] = info
    atomic_write(path, lambda fh: torch.save(out, fh))
    return Path(path)


RESUME_KEY = "resume_key"
"""The ``unlearning`` record's entry that :func:`saved_unlearned` matches: method, settings, concept, the
original's :func:`state_digest` and the data fingerprint."""


def state_digest(model: Any) -> str:
    """A SHA-256 over ``model``'s state dict (names, dtypes, shapes and bytes, in name order) and its SID
    codes: it tells whether a saved unlearned model was made from these very weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    codes = getattr(getattr(model, "backbone", None), "codes", None)
    if codes is not None:
        digest.update(codes.detach().cpu().numpy().astype(np.int64).tobytes())
    return digest.hexdigest()


def saved_unlearned(path: Path, key: dict[str, Any]) -> tuple[Any, dict[str, Any], float] | None:
    """The unlearned model an earlier :func:`run_unlearning` saved at ``path``, its details and its
    seconds, when its record's :data:`RESUME_KEY` equals ``key``; ``None`` when there is no such file, it
    cannot be read, or it was made another way (it is then made again and overwritten)."""
    if not path.is_file():
        return None
    try:
        record = load_checkpoint(path).get("unlearning") or {}
    except CheckpointError:
        return None
    if record.get(RESUME_KEY) != key:
        return None
    info = {k: v for k, v in record.items() if k not in (RESUME_KEY, "seconds", "method", "concept")}
    return load_generative(path)[0], info, float(record.get("seconds", float("nan")))


def _plain(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k != "losses"} | (
        {"final_loss": info["losses"][-1]} if info.get("losses") else {}
    )


@contextlib.contextmanager
def step_progress(desc: str, total: int, enabled: bool) -> Iterator[Callable[[int, float], None] | None]:
    """A tqdm bar on stderr over ``total`` fine-tuning steps (the loop's ``progress`` callback: it advances
    the bar and shows the step's loss), or ``None`` when not ``enabled``."""
    if not enabled or total <= 0:
        yield None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, leave=False, unit="step") as bar:

        def update(step: int, loss: float) -> None:
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            bar.update(1)

        yield update


def _run_method(
    method: MethodSettings,
    model: Any,
    data: dict[str, Any],
    concept: Concept,
    forget: np.ndarray,
    examples: tuple[Examples, Examples],
    save_dir: str | Path | None,
    reuse: dict[str, Any] | None,
    progress: bool,
) -> tuple[Any, dict[str, Any]]:
    """One checked method on ``model``: the unlearned model and its summary."""
    f_ex, r_ex = examples
    if method.kind == "retrain":
        unlearned = (reuse or {}).get("retrain")
        if unlearned is None:
            unlearned = retrain_without(
                model, data, np.flatnonzero(forget), method.get(RetrainSettings), workdir=save_dir,
                progress=progress,
            )
        return unlearned, {}
    if method.kind == "suppression":
        sup = method.get(SuppressionSettings)
        codes = model.backbone.codes.cpu().numpy()
        prefixes = suppressed_prefixes(codes, forget, sup.threshold)
        hidden = suppressed_items(codes, prefixes)
        info = {
            "threshold": sup.threshold,
            "masked_tokens": len(prefixes),
            "hidden_forget_items": int((hidden & forget).sum()),
            "hidden_retain_items": int((hidden & ~forget).sum()),
        }
        return with_suppression(model, prefixes, sup.penalty), info
    loop = method.get(FinetuneSettings)
    with step_progress(method.name, loop.steps, progress) as bar:
        if method.kind == "ga":
            return run_ga(model, f_ex, r_ex, loop, progress=bar)
        if method.kind == "npo":
            return run_npo(model, f_ex, r_ex, loop, beta=method.get(NPOSettings).beta, progress=bar)
        return run_tracer(
            model, forget, f_ex, r_ex, loop, method.get(TracerSettings), reason=f"concept: {concept.text}",
            progress=bar,
        )


def run_unlearning(
    model: Any,
    ckpt: dict[str, Any],
    data: dict[str, Any],
    concept: Concept,
    methods: dict[str, dict[str, Any]],
    save_dir: str | Path | None = None,
    eval_batch_size: int = 256,
    log: Callable[[str], None] = print,
    reuse: dict[str, Any] | None = None,
    expect_fingerprint: str | None = None,
    stages: tuple[Literal["valid", "test"], ...] = ("test",),
    progress: bool = False,
    per_user: bool = False,
    resume: bool = False,
) -> dict[str, Any]:
    """Run ``methods`` (module docstring) on ``model`` for ``concept``; the report dict.

    ``methods`` maps a method name, or a variant ``NAME@LABEL`` (:func:`method_kind`), to its settings; every
    entry is checked (:func:`recframe.unlearning.settings.parse_methods`) before the data load and the first
    method, and they run in :data:`METHOD_ORDER` of their kinds, variants in the given order. ``reuse`` may
    hold an already trained retrain reference under ``"retrain"`` (the benchmark keeps one per concept).
    Unlearned models are saved under ``save_dir`` when given. ``expect_fingerprint`` (the checkpoint's data
    fingerprint) refuses data other than the model was trained on. ``stages``: the splits every model is
    scored on; the report's ``rows`` are the test rows when ``"test"`` is among them, and each stage's rows
    are under ``rows_by_stage`` (a validation grid chooses settings on ``"valid"`` alone). ``progress``: a
    bar on stderr while the retrain reference trains and while each method fine-tunes. ``per_user``: the
    report also holds ``per_user[stage]`` (:func:`per_user_retain`: every model's per-user retain NDCG@10,
    aligned over the same users) for paired intervals. ``resume`` (with ``save_dir``): a method whose
    checkpoint an earlier call saved there from the same settings, concept, original weights and data
    (:func:`saved_unlearned`) is scored from it instead of run again, so a killed grid loses at most the
    method it was in; its recorded seconds are kept.

    Raises:
        DataError: a bad setting (naming ``methods.<name>.<key>``) or ``eval_batch_size`` below 1, before
            any work; data other than the checkpoint's; a concept that holds for no item or every item.
    """
    if isinstance(eval_batch_size, bool) or not isinstance(eval_batch_size, int) or eval_batch_size < 1:
        raise DataError(f"eval_batch_size: {eval_batch_size!r}; it must be a whole number >= 1 (e.g. 256).")
    checked = parse_methods(methods)
    order = sorted(checked, key=lambda n: METHOD_ORDER.index(checked[n].kind))
    dm = RecDataModule(**data)
    if expect_fingerprint and dm.fingerprint != expect_fingerprint:
        raise DataError(
            f"the checkpoint was trained on data with fingerprint {expect_fingerprint}, but these data "
            f"settings give {dm.fingerprint}; remove the data: overrides that change the data."
        )
    forget = forget_mask(concept, dm)
    log(f"concept {concept.text!r}: {int(forget.sum())} forget items of {dm.n_items}")
    examples = Examples.from_histories(dm.split.train.histories, dm.max_len).split(forget)
    details: dict[str, Any] = {
        "forget_items": int(forget.sum()),
        "forget_examples": len(examples[0]),
        "retain_examples": len(examples[1]),
    }

    def evaluate(m: Any) -> dict[str, UnlearningMetrics]:
        return evaluate_stages(m, dm, forget, eval_batch_size, stages)

    t0 = time.perf_counter()
    original = evaluate(model)
    results: dict[str, tuple[dict[str, UnlearningMetrics], float]] = {
        "original": (original, time.perf_counter() - t0)
    }
    origin = state_digest(model) if save_dir is not None else ""
    for name in order:
        path = Path(save_dir) / f"{name.replace('@', '__')}.ckpt" if save_dir is not None else None
        key = {"method": name, "concept": concept.text, "settings": dict(methods[name] or {}),
               "original": origin, "data": dm.fingerprint}
        saved = saved_unlearned(path, key) if resume and path is not None else None
        if saved is not None:
            unlearned, info, seconds = saved
            log(f"{name}: reusing {path.name} (same method, settings, concept, original and data)")
        else:
            log(f"{name} ...")
            start = time.perf_counter()
            unlearned, info = _run_method(
                checked[name], model, data, concept, forget, examples, save_dir, reuse, progress
            )
            seconds = time.perf_counter() - start
            info = _plain(info)
        metrics = evaluate(unlearned)
        results[name] = (metrics, seconds)
        details[name] = {"settings": dict(methods[name] or {}), **info}
        if path is not None:
            if saved is None:
                save_unlearned(unlearned, ckpt, path, {**info, "method": name, "concept": concept.text,
                                                       RESUME_KEY: key, "seconds": seconds})
            details[name]["checkpoint"] = str(path)
        log(f"{name}: {metrics[stages[-1]].row(original[stages[-1]])} ({seconds:.0f} s)")
    by_stage = stage_rows(results, stages)
    report_stage = "test" if "test" in stages else stages[0]
    report = {
        "concept": concept.text,
        "rows": by_stage[report_stage],
        "rows_by_stage": by_stage,
        "details": details,
        "test_cases": {"forget": original[report_stage].n_forget_cases,
                       "retain": original[report_stage].n_retain_cases},
    }
    if per_user:
        report["per_user"] = {stage: per_user_retain(results, stage) for stage in stages}
    return report


def per_user_retain(
    results: dict[str, tuple[dict[str, UnlearningMetrics], float]], stage: str
) -> dict[str, Any]:
    """``{"users": [...], "retain_ndcg@10": {name: [...]}}``: each model's per-user retain NDCG@10 on
    ``stage``, over the same retain users in the same order (checked: the models were scored on the same
    cases)."""
    users = results["original"][0][stage].retain_users
    out: dict[str, list[float]] = {}
    for name, (metrics, _) in results.items():
        m = metrics[stage]
        if not torch.equal(m.retain_users, users):
            raise ValueError(f"{name}: its retain cases on {stage} are not the original model's")
        out[name] = [float(v) for v in m.retain_per_user]
    return {"users": [int(u) for u in users], "retain_ndcg@10": out}


def report_table(report: dict[str, Any]) -> str:
    """Markdown table of one concept's rows."""
    cols = [
        "exposure@10",
        "forget_recall@10",
        "retain_ndcg@10",
        "retain_ndcg@10_rel",
        "distance_to_retrain@10",
    ]
    lines = ["| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in report["rows"].items():
        cells = [f"{row[c]:.4f}" if isinstance(row.get(c), float) else "–" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
