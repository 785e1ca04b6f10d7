"""Recorded results name paths relative to the working directory, never by the machine's absolute path."""

from pathlib import Path

import pytest

from recframe.runs import _shown


def test_paths_inside_the_working_directory_are_recorded_relative(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "configs" / "a.yaml"
    config.parent.mkdir()
    config.write_text("")
    assert _shown(config) == "configs/a.yaml"
    assert _shown("configs/a.yaml") == "configs/a.yaml"
    outside = tmp_path.parent / "elsewhere.yaml"
    assert _shown(outside) == str(outside)  # outside the working directory: kept as given
