"""Checkpoint integrity: damaged files are refused with one line naming the file, never loaded silently."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch

from recframe.checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint
from recframe.cli import main
from recframe.serving import Recommender


def _flip_inside_tensor(path: Path, member_suffix: str = "data/0", at: int = 1000) -> None:
    """Flip one bit inside the stored bytes of a tensor (the pickle and the zip directory stay intact)."""
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(member_suffix))
    raw = bytearray(path.read_bytes())
    # local header: 30 fixed bytes, then the name and the extra field, then the member's data
    name_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    raw[info.header_offset + 30 + name_len + extra_len + at] ^= 0x01
    path.write_bytes(bytes(raw))


def test_one_flipped_bit_in_a_weight_tensor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.ckpt"
    save_checkpoint({"w": torch.arange(4096, dtype=torch.float32)}, path)
    assert torch.equal(load_checkpoint(path)["w"], torch.arange(4096, dtype=torch.float32))  # intact: loads
    _flip_inside_tensor(path)
    with pytest.raises(CheckpointError, match=r"weights\.ckpt is truncated or corrupted .*CRC"):
        load_checkpoint(path)


@pytest.mark.parametrize("content", [b"hello\n", b"", b"PK\x03\x04 not really a zip"])
def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.ckpt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=r"notes\.ckpt is truncated or corrupted"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"notes\.ckpt"):
        Recommender.from_checkpoint(path)


def test_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="is a directory; pass a checkpoint file inside it"):
        load_checkpoint(tmp_path)


def test_a_pickled_non_dict_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.ckpt"
    torch.save([1, 2, 3], path)
    with pytest.raises(CheckpointError, match=r"list\.ckpt holds a list"):
        load_checkpoint(path)


def _bad_checkpoint(tmp_path: Path, case: str) -> Path:
    """A 6-byte text file, a checkpoint with one flipped byte inside a tensor, or a directory."""
    if case == "text":
        path = tmp_path / "six.ckpt"
        path.write_bytes(b"hello\n")
    elif case == "flipped":
        path = tmp_path / "flipped.ckpt"
        save_checkpoint({"w": torch.arange(4096, dtype=torch.float32)}, path)
        _flip_inside_tensor(path)
    else:
        path = tmp_path / "sub"
        path.mkdir()
    return path


@pytest.mark.parametrize("case", ["text", "flipped", "directory"])
def test_cli_recommend_refuses_bad_checkpoints_in_one_line(tmp_path: Path, case: str, capsys) -> None:
    expect = {"text": "corrupted", "flipped": "CRC", "directory": "is a directory"}[case]
    path = _bad_checkpoint(tmp_path, case)
    assert main(["recommend", "--ckpt", str(path), "--user", "1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err and expect in err


@pytest.mark.parametrize("case", ["text", "flipped", "directory"])
def test_cli_test_refuses_a_bad_ckpt_path_in_one_line(tmp_path: Path, case: str, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECFRAME_TRACEBACK", raising=False)
    path = _bad_checkpoint(tmp_path, case)
    config = Path(__file__).resolve().parent.parent / "configs" / "smoke" / "popularity.yaml"
    with pytest.raises(SystemExit) as exc:
        main(["test", "--config", str(config), "--ckpt_path", str(path), "--trainer.enable_progress_bar",
              "false"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("recframe: error: checkpoint ") and str(path) in line


def test_best_checkpoint_of_a_run_folder_is_its_newest_versions_best(tmp_path) -> None:
    """A file is itself; a run folder gives the best-*.ckpt of its newest version that has one (version_10
    after version_9, a version with last.ckpt alone skipped); a folder without one is a clear error."""
    import pytest

    from recframe.checkpoint_io import CheckpointError, best_checkpoint

    run = tmp_path / "runs" / "model"
    for version, files in {2: ["best-epoch=3-val_ndcg=0.1.ckpt"], 9: ["best-epoch=5-val_ndcg=0.2.ckpt"],
                           10: ["best-epoch=7-val_ndcg=0.3.ckpt", "last.ckpt"], 11: ["last.ckpt"]}.items():
        (run / f"version_{version}" / "checkpoints").mkdir(parents=True)
        for name in files:
            (run / f"version_{version}" / "checkpoints" / name).write_bytes(b"")
    assert best_checkpoint(run).name == "best-epoch=7-val_ndcg=0.3.ckpt"
    assert best_checkpoint(run).parent.parent.name == "version_10"
    single = run / "version_2" / "checkpoints" / "best-epoch=3-val_ndcg=0.1.ckpt"
    assert best_checkpoint(single) == single
    (tmp_path / "empty" / "version_0").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="holds no best-\\*.ckpt.*version_0"):
        best_checkpoint(tmp_path / "empty")
