"""Suppression: the share rule by hand, and masked tokens really masked in exact scoring and beam search."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recframe.models.generative import TIGER, SIDDecoder
from recframe.unlearning.suppression import suppressed_items, suppressed_prefixes, with_suppression
from tests.generative.fixtures.make_legacy import SIZES, codes

KW = {"max_len": 6, "dim": 16, "n_layers": 1, "n_heads": 2, "inner": 32, "dropout": 0.0}


def test_share_rule_by_hand() -> None:
    table = np.array([[0, 0], [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0]])
    forget = np.array([False, True, True, False, True, False, False])
    # level-0 shares: code 0 -> 2/3, code 1 -> 1/2, code 2 -> 0; nodes (0,0),(0,1),(1,0) -> 1
    assert suppressed_prefixes(table, forget, 0.5) == [[0], [1, 0]]  # (0,x) children covered by [0]
    assert suppressed_prefixes(table, forget, 0.7) == [[0, 0], [0, 1], [1, 0]]
    assert suppressed_prefixes(table, forget, 0.0) == [[0], [1]]
    hidden = suppressed_items(table, [[0], [1, 0]])
    assert np.flatnonzero(hidden).tolist() == [1, 2, 3, 4]  # item 3 is collateral (a retain item)
    with pytest.raises(ValueError, match="threshold"):
        suppressed_prefixes(table, forget, 1.0)


@pytest.mark.parametrize("cls", [TIGER, SIDDecoder])
@pytest.mark.parametrize("normalize", ["codebook", "valid"])
def test_masked_tokens_are_masked_in_exact_scoring_and_beam_search(cls, normalize) -> None:
    torch.manual_seed(0)
    model = cls(n_items=40, normalize=normalize, **KW)
    table = codes()
    model.build_from_codes(table, SIZES)
    model.eval()
    forget = np.zeros(41, dtype=bool)
    forget[[3, 7, 8, 20, 21, 22, 30]] = True
    prefixes = suppressed_prefixes(table, forget, 0.4)
    hidden = torch.from_numpy(suppressed_items(table, prefixes))
    assert hidden.any() and not hidden.all()
    masked = with_suppression(model, prefixes)
    history = torch.tensor([[0, 1, 2, 5, 9, 11], [4, 4, 6, 7, 8, 10]])
    with torch.no_grad():
        before = model.score({"history": history})
        scores = masked.score({"history": history})
        assert torch.isfinite(scores[:, 1:]).all()  # the evaluator accepts them
        assert (scores[:, hidden] < -1e8).all() and (scores[:, 1:][:, ~hidden[1:]] > -1e3).all()
        assert (before[:, hidden] > -1e3).all()  # the same weights without the mask
        torch.testing.assert_close(
            scores, masked.score({"history": history}, cached=False), rtol=0, atol=1e-3
        )
        n_open = int((~hidden[1:]).sum())
        beam = masked.generate(history, k=n_open, beam=64)  # beam >= every inner level: exact
        assert not hidden[beam.items].any()
        narrow = masked.generate(history, k=5, beam=5)
        assert not hidden[narrow.items].any()
        assert hidden[model.generate(history, k=n_open, beam=64).items].any()  # unmasked: they do show up
    # the mask is a checkpointed add-on setting: a rebuilt model masks the same tokens
    rebuilt = type(masked)(**{k: v for k, v in masked.hparams.items()})
    rebuilt.load_state_dict(masked.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(rebuilt.eval().score({"history": history}), scores)
