"""What the recframe-command tests share: the smoke configs, quiet trainer flags, the one-line error
checks and the refusal of any work before a config is valid (the ``in_tmp`` fixture is in conftest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recframe.cli import RecCLI, main, run_cli

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke"
QUIET = ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]


def fit_smoke(config: str | Path, save_dir: Path, epochs: int, *extra: str) -> RecCLI:
    """``recframe fit`` on a smoke config (a name under ``configs/smoke`` or a path) for ``epochs`` epochs,
    in process, without a progress bar, logging under ``save_dir``; ``extra`` are more CLI arguments.
    Returns the fitted CLI (its ``model``, ``datamodule`` and ``trainer``)."""
    path = config if isinstance(config, Path) else SMOKE / config
    cli = run_cli(["--config", str(path), "--trainer.max_epochs", str(epochs),
                   "--trainer.enable_progress_bar", "false",
                   "--trainer.logger.init_args.save_dir", str(save_dir), *extra], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    return cli


def one_error_line(err: str, *needles: str) -> str:
    """The error is the last stderr line, the only one starting with ``recframe``; no traceback."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("recframe")]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0], err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def run_error(command: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """stderr of ``recframe COMMAND ARGS`` (quiet), which must exit with the usage-error code 2."""
    with pytest.raises(SystemExit) as exc:
        main([command, *args, *QUIET])
    assert exc.value.code == 2
    return capsys.readouterr().err


def refuse_work(monkeypatch: pytest.MonkeyPatch, module: object, names: tuple[str, ...]) -> list[str]:
    """Replace each of ``module``'s ``names`` by a stub that records its name and fails the test: a config
    error must be raised before any of them runs. Returns the record."""
    calls: list[str] = []

    def refuse(name: str) -> Any:
        def fake(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} ran although the config is invalid")

        return fake

    for name in names:
        monkeypatch.setattr(module, name, refuse(name))
    return calls
