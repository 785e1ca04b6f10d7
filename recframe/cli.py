"""The ``recframe`` command.

Subcommands (``recframe`` alone prints this list):

* ``recframe fit|validate|test --config FILE`` — LightningCLI over any
  :class:`recframe.models.RecModel` and :class:`recframe.data.RecDataModule`
  (``class_path``/``init_args``, ``--print_config``, dotted overrides such as
  ``--trainer.max_epochs 5``). Constructor type hints are the config schema:
  a wrong key or type stops before any work, naming the key. Lightning's
  ``predict`` is not offered (a ranking model has nothing to predict per batch;
  use ``recommend``).
* ``recframe data prepare NAME`` / ``recframe data list`` — fetch, verify and
  cache a catalogued dataset; list the catalogue.
* ``recframe recommend --ckpt CKPT --user ID [-k 10] [--format table|json|csv]
  [--decode exact|beam --beam 20]`` — top-k items from a checkpoint, in raw ids
  (:class:`recframe.serving.Recommender`); a ``-k`` above the catalogue is clipped with one note.
* ``recframe continual|conversational|unlearn|tune ...`` — commands of their own packages
  (:data:`EXTRA_COMMANDS`), loaded only when used.

A misspelled subcommand gets ``unknown command X; did you mean Y`` before anything loads; a config error
caused by a command-line override names the override (``--trainer.max_epochs abc``), not the config file.
``fit`` ends by printing where it wrote the best checkpoint and ``last.ckpt``.

Settings written once: ``n_items`` and ``n_users`` come from the data, and
``max_len`` is linked from ``data.max_len`` to the model (LightningCLI argument
links), so a config sets it only under ``data:``; a model ``max_len`` in a config
or on the command line is refused with one line saying so.

Defaults every run gets: seed 0, CSV logs under ``runs/``, a checkpoint of the
best validation NDCG plus ``last.ckpt`` after every epoch (written atomically, loadable with
``weights_only=True``), and run metadata (resolved config, seed, data
fingerprint, library versions) inside every checkpoint.

User errors (a bad config value, missing data, a damaged checkpoint, a model
producing non-finite scores, a bad ``-k``) end in one line ``recframe...: error: ...``
and exit status 2; set ``RECFRAME_TRACEBACK=1`` for the full traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

import yaml
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback

from recframe.callbacks import BestCheckpoint, RandomState, RunMetadata
from recframe.data.datamodule import RecDataModule
from recframe.models.base import RecModel


class RunFolderSaveConfig(SaveConfigCallback):
    """Save the resolved config into the run's folder, and nowhere else.

    Lightning writes ``config.yaml`` into ``trainer.log_dir``; without a logger that is the default root
    directory, the working directory unless set, so ``recframe fit --config config.yaml --trainer.logger
    false`` would overwrite the user's own config with the resolved one (and a script leaves a stray
    ``config.yaml`` behind). With no logger and no ``--trainer.default_root_dir`` there is no run folder,
    so nothing is saved.
    """

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if trainer.logger is None and Path(trainer.default_root_dir).resolve() == Path.cwd().resolve():
            return
        super().setup(trainer, pl_module, stage)


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
        # written once, under data: (models without a max_len parameter ignore the link)
        for key in LINKED_FROM_DATA:
            parser.link_arguments(f"data.{key}", f"model.init_args.{key}", apply_on="parse")

    def parse_arguments(self, parser: Any, args: Any) -> None:
        """Refuse a model setting that is linked from ``data`` before parsing (the link would hide it)."""
        refuse_linked_model_keys(sys.argv[1:] if args is None else args)
        super().parse_arguments(parser, args)

    def _parse_ckpt_path(self) -> None:
        """Verify ``--ckpt_path`` (a directory, a damaged or non-checkpoint file: one clear error) before
        Lightning reads the model's hyperparameters from it."""
        sub = self.config.get("subcommand")
        ckpt_path = self.config[sub].get("ckpt_path") if sub else None
        # Lightning's own names ("best", "last", ...) and remote URLs are resolved by Lightning
        if ckpt_path and str(ckpt_path) not in _LIGHTNING_CKPT_NAMES and "://" not in str(ckpt_path) \
                and not str(ckpt_path).startswith("registry"):
            from recframe.checkpoint_io import check_checkpoint_file

            check_checkpoint_file(ckpt_path)
            self._compare_checkpoint(sub, ckpt_path)
        super()._parse_ckpt_path()

    def _compare_checkpoint(self, sub: str, ckpt_path: str) -> None:
        """Refuse a checkpoint of another model class, or whose weights a linked data setting would reshape;
        warn in one line about the model settings the checkpoint's own values replace."""
        from recframe.checkpoint_io import load_checkpoint
        from recframe.checkpoint_match import compare_checkpoint_to_config, ignored_settings_warning

        model = self.config[sub].get("model")
        if model is None or not model.get("class_path"):
            return
        ignored = compare_checkpoint_to_config(
            load_checkpoint(ckpt_path), ckpt_path, model.class_path, model.get("init_args") or {},
            linked={key: f"data.{key}" for key in LINKED_FROM_DATA})
        if ignored:
            print(f"recframe {sub}: warning: {ignored_settings_warning(ignored)}", file=sys.stderr)

    def before_instantiate_classes(self) -> None:
        cfg = self.config[self.subcommand] if self.subcommand else self.config
        parser = self._parser(self.subcommand)  # the subcommand's parser, as SaveConfigCallback uses
        self._config_text = parser.dump(cfg, skip_unset=False, skip_validation=True)
        self._seed = cfg.get("seed_everything")
        model = cfg.get("model")
        if model is not None and model.get("class_path"):  # bad model settings, before the data loads
            from recframe.constructor_errors import model_config_error

            error = model_config_error(model.class_path, model.get("init_args"),
                                       linked={key: f"data.{key}" for key in LINKED_FROM_DATA})
            if error is not None:
                raise error
        from recframe.constructor_errors import callback_config_error

        error = callback_config_error((cfg.get("trainer") or {}).get("callbacks") or ())
        if error is not None:  # bad callback settings, before the data loads
            raise error

    def after_fit(self) -> None:
        """Say where the checkpoints of this fit were written (one line each)."""
        if self.trainer.is_global_zero:
            for line in checkpoint_lines(self.trainer.callbacks):
                print(line)

    def instantiate_classes(self) -> None:
        from recframe.constructor_errors import CONSTRUCTOR_ERRORS, constructor_config_error

        try:
            super().instantiate_classes()
        except CONSTRUCTOR_ERRORS as exc:  # a constructor refused a setting: one line naming the key
            cfg = self.config[self.subcommand] if self.subcommand else self.config
            error = None if os.environ.get("RECFRAME_TRACEBACK") else constructor_config_error(
                exc, (cfg.get("trainer") or {}).get("callbacks") or ())
            if error is None:
                raise
            raise error from exc
        for cb in self.trainer.callbacks:
            if isinstance(cb, RunMetadata):
                cb.config_text = getattr(self, "_config_text", "")
                cb.seed = self._seed if isinstance(self._seed, int) else None


_LIGHTNING_CKPT_NAMES = ("best", "last", "hpc")


def checkpoint_lines(callbacks: list[Any]) -> list[str]:
    """``best checkpoint (val_ndcg 0.2708): PATH`` / ``last checkpoint: PATH`` for each checkpoint callback.

    A monitored ``ModelCheckpoint`` reports its best file and score; an unmonitored one (the default
    ``last.ckpt`` writer) its latest file. A callback that wrote nothing says so.
    """
    lines = []
    for cb in callbacks:
        if not isinstance(cb, ModelCheckpoint):
            continue
        if cb.monitor:
            score = cb.best_model_score
            shown = f" ({cb.monitor} {float(score):.4f})" if score is not None else ""
            lines.append(f"best checkpoint{shown}: {cb.best_model_path or 'none written'}")
        else:
            lines.append(f"last checkpoint: {cb.last_model_path or cb.best_model_path or 'none written'}")
    return lines

#: data settings the CLI links to the model's constructor argument of the same name
LINKED_FROM_DATA = ("max_len",)


def refuse_linked_model_keys(args: Any) -> None:
    """Raise one clear ``ArgumentError`` if a config file or an override sets a linked model key.

    ``args`` is the LightningCLI argument list (config files after ``--config``/``-c``,
    dotted overrides) or a config dict. A value linked from ``data`` would otherwise be
    overwritten silently, so a config that still sets ``model.init_args.max_len`` is refused.
    """
    if isinstance(args, dict):
        _check_model_section(args.get("model"), "the config")
        return
    args = [str(a) for a in args]
    for i, arg in enumerate(args):
        flag, _, inline = arg.partition("=")
        value = inline or (args[i + 1] if i + 1 < len(args) else "")
        for key in LINKED_FROM_DATA:
            if flag in (f"--model.init_args.{key}", f"--model.{key}"):
                raise argparse.ArgumentError(None, _linked_message(key, f"the override {flag}"))
        if flag in ("--config", "-c", "--model") and value and Path(value).is_file():
            try:
                loaded = yaml.safe_load(Path(value).read_text())
            except (yaml.YAMLError, OSError, UnicodeDecodeError):
                continue  # the parser reports unreadable files itself
            if isinstance(loaded, dict):
                section = loaded if flag == "--model" else loaded.get("model")
                _check_model_section(section, value)


def _check_model_section(section: Any, source: str) -> None:
    if not isinstance(section, dict):
        return
    init_args = section.get("init_args")
    for key in LINKED_FROM_DATA:
        if key in section or (isinstance(init_args, dict) and key in init_args):
            raise argparse.ArgumentError(None, _linked_message(key, source))


def _linked_message(key: str, source: str) -> str:
    return (f"model.init_args.{key} is set in {source}, but the model's {key} is linked from "
            f"data.{key}; set {key} once, under data:, and remove it from the model.")


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
    parameters), the logging interval note for epochs shorter than
    ``log_every_n_steps``, and the note that a script calling :func:`run_cli` with ``args`` has a command
    line of its own (the ``args`` win; the script's ``sys.argv`` is not parsed).
    """
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropAdverts())
    warnings.filterwarnings("ignore", message=r".*configure_optimizers` returned `None`.*")
    warnings.filterwarnings("ignore", message=r".*`training_step` returned `None`.*")
    warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    # evaluation metrics are computed from sums already reduced across processes (RecModel),
    # so every rank logs the same global value and Lightning's sync_dist advice does not apply
    warnings.filterwarnings("ignore", message=r".*self\.log\('(val|test)[/_].*sync_dist=True.*")
    # run_cli(args=...) is how a benchmark or script runs a config: the args are the run's, and the
    # script's own command line (sys.argv) is never parsed, so Lightning's both-given warning is noise
    warnings.filterwarnings("ignore", message=r".*not recommended to provide both args and command line.*")


def run_cli(args: list[str] | None = None, run: bool = True, cli_class: type[RecCLI] = RecCLI) -> RecCLI:
    """Build (and by default run) LightningCLI for ``args`` (``cli_class``: a :class:`RecCLI` subclass)."""
    quiet_lightning()
    import recframe.models.generative  # noqa: F401 - registers TIGER, SIDDecoder, FLASH (listed by fit --help)

    return cli_class(
        RecModel,
        RecDataModule,
        subclass_mode_model=True,
        seed_everything_default=0,
        trainer_defaults=default_trainer_settings(),
        save_config_callback=RunFolderSaveConfig,
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"exit_on_error": False},
        auto_configure_optimizers=False,
        args=args,
        run=run,
    )


def _data_command(argv: list[str]) -> int:
    parser = _OneLineParser(prog="recframe data", description="Dataset acquisition and caching.")
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
        if os.environ.get("RECFRAME_TRACEBACK"):
            raise
        print(f"recframe data: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``prog: error: ...``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; pass a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1; pass a whole number >= 1")
    return value


FORMATS = ("table", "json", "csv")


def format_recommendations(out: Any, fmt: str) -> str:
    """Render :class:`~recframe.serving.Recommendations` as ``table`` (aligned text), ``json`` or ``csv``.

    ``json`` is one object per query, ``{"query", "fallback", "items": [{"rank", "item", "score"[,
    "title"]}]}``; ``csv`` and ``table`` are the long frame of ``Recommendations.to_frame``
    (``query, rank, item, score[, title], fallback``), one row per recommended item.
    """
    if fmt == "json":
        rows = []
        for r, query in enumerate(out.queries):
            items = []
            for rank, (item, score) in enumerate(zip(out.items[r], out.scores[r]), start=1):
                entry = {"rank": rank, "item": item, "score": float(score)}
                if out.titles is not None:
                    entry["title"] = out.titles[r][rank - 1]
                items.append(entry)
            rows.append({"query": query, "fallback": bool(out.fallback[r]), "items": items})
        return json.dumps(rows, indent=2)
    frame = out.to_frame()
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    return frame.to_string(index=False) if len(frame) else "no eligible items"


def _recommend_command(argv: list[str]) -> int:
    parser = _OneLineParser(
        prog="recframe recommend", description="Top-k recommendations from a checkpoint, in raw ids.")
    parser.add_argument("--ckpt", required=True, help="checkpoint written by `recframe fit`")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", action="append", help="raw user id (repeat for several users)")
    who.add_argument("--history", action="append",
                     help="comma-separated raw item ids, oldest first (sequential models; repeatable)")
    parser.add_argument("-k", type=_positive_int, default=10,
                        help="items per user, a whole number >= 1 (capped at the catalogue size; default 10)")
    parser.add_argument("--include-seen", action="store_true",
                        help="keep items the user already interacted with")
    parser.add_argument("--cold-start", choices=["error", "popularity"], default="error",
                        help="unknown users: error (default) or the most popular items")
    parser.add_argument("--index", default="Flat",
                        help="FAISS factory string for embedding models (default Flat, exact)")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="output: an aligned table (default), json or csv (for scripts)")
    parser.add_argument("--decode", choices=["exact", "beam"], default="exact",
                        help="exact full-catalogue scoring (default) or trie beam search (generative models)")
    parser.add_argument("--beam", type=_positive_int, default=None,
                        help="beam width for --decode beam (default 20)")
    ns = parser.parse_args(argv)
    if ns.beam is not None and ns.decode != "beam":
        parser.error("--beam applies only to --decode beam")
    from recframe.checkpoint_io import CheckpointError
    from recframe.data.interactions import DataError
    from recframe.serving import Recommender, UnknownIdError

    try:
        rec = Recommender.from_checkpoint(ns.ckpt, index=ns.index)
        histories = [h.split(",") for h in ns.history] if ns.history else None
        extra = {"beam": ns.beam} if ns.decode == "beam" else {}
        out = rec.recommend(users=ns.user, histories=histories, k=ns.k, exclude_seen=not ns.include_seen,
                            cold_start=ns.cold_start, decode=ns.decode, **extra)
    except (CheckpointError, DataError, UnknownIdError, ValueError) as exc:
        if os.environ.get("RECFRAME_TRACEBACK"):
            raise
        print(f"recframe recommend: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    note = k_clip_note(ns.k, len(rec.item_ids) - 1, exclude_seen=not ns.include_seen)
    if note:
        print(f"recframe recommend: note: {note}", file=sys.stderr)
    print(format_recommendations(out, ns.format))
    return 0


def k_clip_note(k: int, n_items: int, exclude_seen: bool) -> str | None:
    """The note for a ``-k`` above the catalogue size (``Recommender.recommend`` clips it), else ``None``."""
    if k <= n_items:
        return None
    fewer = "; fewer where the user's seen items are excluded" if exclude_seen else ""
    return (f"-k {k} is more than the catalogue's {n_items} items; showing every eligible item "
            f"(at most {n_items} per row{fewer}).")


def _one_line(message: str) -> str:
    return " ".join(message.split())


USAGE = """usage: recframe {fit,validate,test,data,recommend,continual,conversational,unlearn,tune} ...

  recframe fit      --config FILE [--key.sub VALUE ...]   train (and validate) a model from YAML
  recframe validate --config FILE --ckpt_path CKPT        validation metrics of a checkpoint
  recframe test     --config FILE --ckpt_path CKPT        test metrics of a checkpoint
  recframe data     {prepare NAME, list}                  fetch, verify and cache datasets
  recframe recommend --ckpt CKPT --user ID [-k 10]        top-k items for a user, with titles
                   [--format table|json|csv] [--decode exact|beam --beam 20]
  recframe continual --config FILE                        the staged continual-learning protocol
  recframe conversational evaluate --config FILE          the TRACE-style conversational benchmark
                   {generate --out DIR, validate DIR}     write or check a conversational release
  recframe unlearn --config FILE                          concept unlearning of a generative model
  recframe tune --config FILE --space SPACE.yaml --trials N   hyperparameter search on validation (Optuna)

`recframe fit --help` lists every key of the config schema; `--print_config` shows the resolved config.
"""


#: subcommands that live in their own package: name -> "module:function" taking the remaining argv and
#: returning an exit code (imported only when used, so the core CLI does not load them)
EXTRA_COMMANDS: dict[str, str] = {
    "continual": "recframe.continual.cli:main",
    "conversational": "recframe.conversational.cli:main",
    "unlearn": "recframe.unlearning.cli:main",
    "tune": "recframe.tuning.cli:main",
}


def _extra_command(name: str, argv: list[str]) -> int:
    import importlib

    from recframe.errors import friendly_errors

    module, func = EXTRA_COMMANDS[name].split(":")
    with friendly_errors(source=name):
        return int(getattr(importlib.import_module(module), func)(argv) or 0)


#: the LightningCLI subcommands (:meth:`RecCLI.subcommands`)
LIGHTNING_COMMANDS = ("fit", "validate", "test")


def all_commands() -> tuple[str, ...]:
    """Every ``recframe`` subcommand, in the order of :data:`USAGE`."""
    return (*LIGHTNING_COMMANDS, "data", "recommend", *EXTRA_COMMANDS)


def unknown_command_message(name: str) -> str:
    """One line for a subcommand that does not exist, with the closest one (``did you mean 'fit'?``)."""
    import difflib

    # Lightning's predict is not offered: a ranking model's top-k comes from recommend
    close = ["recommend"] if name == "predict" else difflib.get_close_matches(name, all_commands(), n=1,
                                                                                cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown command {name!r}{hint} (commands: {', '.join(all_commands())}; see recframe --help)"


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
    if args and args[0] in EXTRA_COMMANDS:
        return _extra_command(args[0], args[1:])
    if not args[0].startswith("-") and args[0] not in LIGHTNING_COMMANDS:
        print(f"recframe: error: {unknown_command_message(args[0])}", file=sys.stderr)
        return 2
    from recframe.errors import friendly_errors

    configs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--config", "-c")]
    with friendly_errors(source=", ".join(configs), args=args):
        run_cli(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
