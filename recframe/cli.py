"""The ``recframe`` command.

* ``recframe fit|validate|test --config FILE`` — LightningCLI over any
  :class:`recframe.models.RecModel` and :class:`recframe.data.RecDataModule`
  (``class_path``/``init_args``, ``--print_config``, dotted overrides such as
  ``--trainer.max_epochs 5``). Constructor type hints are the config schema:
  a wrong key or type stops before any work, naming the key.
* ``recframe data prepare NAME`` — fetch, verify and cache a catalogued dataset.

Defaults every run gets: seed 0, CSV logs under ``runs/``, a checkpoint of the
best validation NDCG plus ``last.ckpt`` after every epoch (written atomically, loadable with
``weights_only=True``), and run metadata (resolved config, seed, data
fingerprint, library versions) inside every checkpoint.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI

from recframe.callbacks import BestCheckpoint, RandomState, RunMetadata
from recframe.data.datamodule import RecDataModule
from recframe.models.base import RecModel


class RecCLI(LightningCLI):
    """LightningCLI with recframe's links and defaults."""

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """fit/validate/test; Lightning's ``predict`` has no meaning for a ranking model here."""
        subs = LightningCLI.subcommands()
        return {name: subs[name] for name in ("fit", "validate", "test")}

    def add_arguments_to_parser(self, parser: Any) -> None:
        parser.link_arguments("data.n_items", "model.init_args.n_items", apply_on="instantiate")
        parser.link_arguments("data.n_users", "model.init_args.n_users", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        cfg = self.config[self.subcommand] if self.subcommand else self.config
        parser = self._parser(self.subcommand)  # the subcommand's parser, as SaveConfigCallback uses
        self._config_text = parser.dump(cfg, skip_none=False, skip_validation=True)
        self._seed = cfg.get("seed_everything")

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        for cb in self.trainer.callbacks:
            if isinstance(cb, RunMetadata):
                cb.config_text = getattr(self, "_config_text", "")
                cb.seed = self._seed if isinstance(self._seed, int) else None


def default_trainer_settings() -> dict[str, Any]:
    """Trainer defaults of every recframe run (a config can override each)."""
    return {
        "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                   "init_args": {"save_dir": "runs", "name": "recframe"}},
        "callbacks": [BestCheckpoint(monitor="val_ndcg", mode="max", filename="best-{epoch}-{val_ndcg:.4f}"),
                      # Lightning 2.6 refreshes save_last only when a better model is saved; this
                      # one rewrites last.ckpt after every training epoch, so resuming loses <= 1 epoch
                      ModelCheckpoint(filename="last", monitor=None, save_top_k=1, every_n_epochs=1,
                                      save_on_train_epoch_end=True, enable_version_counter=False),
                      RunMetadata(), RandomState()],
        "plugins": [{"class_path": "recframe.checkpoint_io.AtomicCheckpointIO"}],
        "num_sanity_val_steps": 0,
        "log_every_n_steps": 10,
        "deterministic": "warn",
    }


class _DropAdverts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip")


def quiet_lightning() -> None:
    """Drop Lightning's product tips and warnings that say nothing about a recframe run.

    Kept: everything about the run itself. Dropped: the LitLogger advert, the
    no-optimizer and no-loss notes for parameter-free models (Popularity;
    ``RecModel.training_step`` itself refuses a ``None`` loss from a model with
    parameters), and the logging interval note for epochs shorter than
    ``log_every_n_steps``.
    """
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropAdverts())
    warnings.filterwarnings("ignore", message=r".*configure_optimizers` returned `None`.*")
    warnings.filterwarnings("ignore", message=r".*`training_step` returned `None`.*")
    warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    # evaluation metrics are computed from sums already reduced across processes (RecModel),
    # so every rank logs the same global value and Lightning's sync_dist advice does not apply
    warnings.filterwarnings("ignore", message=r".*self\.log\('(val|test)[/_].*sync_dist=True.*")


def run_cli(args: list[str] | None = None, run: bool = True) -> RecCLI:
    """Build (and by default run) the LightningCLI for ``args``."""
    quiet_lightning()
    return RecCLI(
        RecModel,
        RecDataModule,
        subclass_mode_model=True,
        seed_everything_default=0,
        trainer_defaults=default_trainer_settings(),
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"exit_on_error": False},
        auto_configure_optimizers=False,
        args=args,
        run=run,
    )


def _data_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="recframe data", description="Dataset acquisition and caching.")
    sub = parser.add_subparsers(dest="action", required=True)
    prep = sub.add_parser("prepare", help="fetch, verify (sha256) and cache a catalogued dataset")
    prep.add_argument("name", help="catalogued dataset name, e.g. ml-100k")
    prep.add_argument("--root", default=None, help="cache directory (default: $RECFRAME_DATA or datasets/)")
    prep.add_argument("--force", action="store_true", help="re-fetch even if a verified copy exists")
    sub.add_parser("list", help="list catalogued datasets")
    ns = parser.parse_args(argv)
    from recframe.data import catalog
    from recframe.data.interactions import DataError

    try:
        if ns.action == "list":
            for name in catalog.known_datasets():
                print(name)
            return 0
        root = ns.root or catalog.default_root()
        path = catalog.prepare(ns.name, root, force=ns.force)
        print(f"{ns.name} ready at {path}")
        return 0
    except DataError as exc:
        print(f"recframe data: error: {exc}", file=sys.stderr)
        return 2


def _recommend_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="recframe recommend", description="Top-k recommendations from a checkpoint, in raw ids.")
    parser.add_argument("--ckpt", required=True, help="checkpoint written by `recframe fit`")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", action="append", help="raw user id (repeat for several users)")
    who.add_argument("--history", action="append",
                     help="comma-separated raw item ids, oldest first (sequential models; repeatable)")
    parser.add_argument("-k", type=int, default=10, help="items per user (default 10)")
    parser.add_argument("--include-seen", action="store_true",
                        help="keep items the user already interacted with")
    parser.add_argument("--cold-start", choices=["error", "popularity"], default="error",
                        help="unknown users: error (default) or the most popular items")
    parser.add_argument("--index", default="Flat",
                        help="FAISS factory string for embedding models (default Flat, exact)")
    ns = parser.parse_args(argv)
    from recframe.checkpoint_io import CheckpointError
    from recframe.serving import Recommender, UnknownIdError

    try:
        rec = Recommender.from_checkpoint(ns.ckpt, index=ns.index)
        histories = [h.split(",") for h in ns.history] if ns.history else None
        out = rec.recommend(users=ns.user, histories=histories, k=ns.k, exclude_seen=not ns.include_seen,
                            cold_start=ns.cold_start)
    except (CheckpointError, UnknownIdError, ValueError) as exc:
        print(f"recframe recommend: error: {exc}", file=sys.stderr)
        return 2
    frame = out.to_frame()
    print(frame.to_string(index=False) if len(frame) else "no eligible items")
    return 0


USAGE = """usage: recframe {fit,validate,test,data,recommend} ...

  recframe fit      --config FILE [--key.sub VALUE ...]   train (and validate) a model from YAML
  recframe validate --config FILE --ckpt_path CKPT        validation metrics of a checkpoint
  recframe test     --config FILE --ckpt_path CKPT        test metrics of a checkpoint
  recframe data     {prepare NAME, list}                  fetch, verify and cache datasets
  recframe recommend --ckpt CKPT --user ID [-k 10]        top-k items for a user, with titles

`recframe fit --help` lists every key of the config schema; `--print_config` shows the resolved config.
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recframe`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if args and args[0] == "data":
        return _data_command(args[1:])
    if args and args[0] == "recommend":
        return _recommend_command(args[1:])
    from recframe.errors import friendly_errors

    configs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--config", "-c")]
    with friendly_errors(source=", ".join(configs)):
        run_cli(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
