"""benchmarks.calibration_ml100k: row labels become plain file names."""

from __future__ import annotations

from benchmarks.calibration_ml100k import slug


def test_slug_keeps_letters_and_digits_only() -> None:
    assert slug("Decoder-only (collaborative IDs)") == "decoder_only_collaborative_ids"
    assert slug("SASRec") == "sasrec"  # the existing SASRec file names stay as they are
