"""What every model built on a SID table shares: building its modules from the codes a checkpoint carries.

A semantic-ID model (``GenerativeRecModel``, ``FLASH``) creates its code-dependent modules only once the
tokenizer has produced the SID table (``bind_data``), so a fresh instance has none. Its checkpoint carries the
codes as a buffer (``codes_key``) and the per-level sizes (``codebook_sizes_t``), plus the full table state
under ``checkpoint["sid_table"]``. This mixin rebuilds the modules from those two tensors before Lightning or
:meth:`load_state_dict` copies the weights in, so a checkpoint loads with no tokenizer and no data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np


class SIDTableState(ABC):
    """Mixin for a ``LightningModule`` whose modules are built from a SID table.

    Subclasses set ``codes_key`` (the state-dict key of the codes buffer), keep ``sid_table_state`` (the
    :class:`~recframe.tokenizers.SIDTable` state to store, or ``None``) and implement :meth:`sid_built` and
    :meth:`build_from_codes`.
    """

    codes_key: ClassVar[str]
    sid_table_state: dict[str, Any] | None

    @abstractmethod
    def sid_built(self) -> bool:
        """Whether the code-dependent modules exist."""

    @abstractmethod
    def build_from_codes(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        """Create the code-dependent modules for a SID table ``[n_items + 1, L]``."""

    def build_from_state(self, state: Any) -> None:
        """Build from a state dict's codes and sizes if not built yet (no-op without them)."""
        if not self.sid_built() and self.codes_key in state:
            self.build_from_codes(state[self.codes_key].cpu().numpy(),
                                  tuple(int(v) for v in state["codebook_sizes_t"]))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.sid_table_state is not None:
            checkpoint["sid_table"] = self.sid_table_state

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.sid_table_state = checkpoint.get("sid_table")
        self.build_from_state(checkpoint.get("state_dict", {}))
