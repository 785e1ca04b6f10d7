"""The head probe: the one way any code reads or changes attention heads.

An *attention site* is one attention module of a model, named by its qualified name in
``model.named_modules()`` (so ``"blocks.1.attn"`` for SASRec's second layer, ``""`` for a bare layer).
:func:`attention_sites` lists them; three context managers act on a selection of ``(site, head)`` pairs
and undo everything when the ``with`` block exits, also when it exits by an exception:

* :func:`read_heads` captures the selected heads' outputs (a :class:`HeadCapture`);
* :func:`scale_heads` multiplies them by given factors;
* :func:`patch_heads` replaces them with given tensors, one tensor per forward call, or a function.

**One layout for every site.** A head's output is its attention-weighted values, before the heads are
concatenated and multiplied by the output projection; a site presents them as
``z [batch, heads, positions, head_dim]`` and one head's slice ``z[:, h]`` is ``[batch, positions,
head_dim]``. The site kinds:

* ``"sasrec"``: :class:`recframe.models.layers.CausalSelfAttention` (SASRec). ``z`` is the
  ``[B, H, L, d_h]`` the layer computes; with grouped-query attention ``H`` counts the query heads.
* ``"row"``: :class:`recframe.models.generative.attention.RowAttention`, every attention of the generative
  backbones (TIGER's encoder, decoder self-attention and cross-attention; the decoder-only model's
  self-attention over its cached history). The layer computes ``[B, N, H, q, d_h]`` for ``B`` users with
  ``N`` query rows of ``q`` tokens each; the probe presents it as ``[B * N, H, q, d_h]`` (row ``n`` of user
  ``b`` is batch index ``b * N + n``). Generative scoring calls a site once per trie level or decoding step,
  with different ``N`` and ``q``, so a capture keeps every call (:meth:`HeadCapture.calls`).
* ``"hf-bert"``: a Hugging Face ``transformers`` BERT-style attention block (``BertAttention`` and the
  models that share its layout, such as the MiniLM sentence encoder: ``.self.query/key/value`` and
  ``.output.dense``). A forward hook on the self-attention reads its context layer ``[B, P, H * d_h]``
  (the input of ``.output.dense``) as ``[B, P, H, d_h].transpose(1, 2)``.

Probes nest: each context sees the heads as left by the contexts entered before it, so ``read_heads``
inside ``scale_heads`` captures the scaled outputs. Nothing upstream of a changed head moves, the model's
math and parameters are untouched, and the probe works under ``torch.inference_mode`` and with autograd.
Quantities that need the weights themselves (a head's value path ``W_O^h W_V^{g(h)}``) come from
:func:`head_projections` and :func:`head_value_output_maps`, so no caller slices fused projections by hand.

Example::

    from recframe.heads import attention_sites, patch_heads, read_heads, scale_heads

    print(attention_sites(model))                         # name, kind, n_heads, head_dim, n_kv_heads
    with read_heads(model, [("blocks.0.attn", 1)]) as cap:
        clean = model.score(batch)
    z = cap["blocks.0.attn", 1]                           # [batch, positions, head_dim]
    with scale_heads(model, {("blocks.1.attn", 0): 0.0}):
        ablated = model.score(batch)                      # head 0 of layer 1 knocked out
    with patch_heads(model, {("blocks.0.attn", 1): cap.calls("blocks.0.attn", 1)}):
        same = model.score(other_batch)                   # head 1 of layer 0 as it was on ``batch``
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Protocol

import torch
from torch import Tensor, nn

__all__ = [
    "AttentionSite", "HeadCapture", "HeadProjections", "attention_sites", "head_projections",
    "head_value_output_maps", "patch_heads", "read_heads", "scale_heads",
]

#: ``fn(z) -> z'`` on one site's heads in the documented layout ``[batch, heads, positions, head_dim]``.
HeadFn = Callable[[Tensor], Tensor]
#: What a patch may be: one tensor for every call, one tensor per forward call, or ``fn(head) -> head``.
Patch = Tensor | Sequence[Tensor] | Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class AttentionSite:
    """One attention module of a model.

    Attributes:
        name: its qualified name in ``model.named_modules()`` (``""`` when the model is the module itself).
        kind: ``"sasrec"``, ``"row"`` or ``"hf-bert"`` (see the module docstring).
        n_heads: query heads, the ``heads`` axis of the layout.
        head_dim: ``d_h``, the last axis of the layout.
        n_kv_heads: key/value heads (``< n_heads`` for grouped-query attention).
        module: the module itself.
    """

    name: str
    kind: str
    n_heads: int
    head_dim: int
    n_kv_heads: int
    module: nn.Module = field(repr=False, compare=False)


@dataclass(frozen=True)
class HeadProjections:
    """Per-head views of one site's projection weights, in the probe's head order.

    The tensors are views of the parameters: write them under ``torch.no_grad()`` to change the model.
    For an input token ``x`` (``D_in``) and key/value head ``g = kv_head[h]``, head ``h`` uses
    ``query[h] @ x + query_bias[h]`` (``[H, d_h, D_in]``, ``[H, d_h]``), ``key[g] @ x + key_bias[g]`` and
    ``value[g] @ x + value_bias[g]`` (``[G, d_h, D_in]``, ``[G, d_h]``), and the site's output is
    ``sum_h output[h] @ z_h + output_bias`` (``output`` ``[H, D_out, d_h]``, ``output_bias`` ``[D_out]``),
    where ``z_h`` is head ``h``'s output in the probe's layout. Absent biases are ``None``.
    """

    query: Tensor
    key: Tensor
    value: Tensor
    output: Tensor
    query_bias: Tensor | None
    key_bias: Tensor | None
    value_bias: Tensor | None
    output_bias: Tensor | None
    kv_head: tuple[int, ...]

    def biases(self) -> list[Tensor]:
        """The biases that exist (e.g. to zero them all under ``torch.no_grad()``)."""
        every = (self.query_bias, self.key_bias, self.value_bias, self.output_bias)
        return [b for b in every if b is not None]


# ---------------------------------------------------------------------------------------------- site kinds
class _Handle(Protocol):
    def remove(self) -> None: ...


class _Kind(ABC):
    """How one family of attention modules exposes its heads and weights."""

    name: str

    @abstractmethod
    def matches(self, module: nn.Module) -> bool:
        """Whether ``module`` is an attention site of this kind."""

    @abstractmethod
    def describe(self, module: nn.Module) -> tuple[int, int, int]:
        """``(n_heads, head_dim, n_kv_heads)``."""

    @abstractmethod
    def install(self, module: nn.Module, fn: HeadFn) -> _Handle:
        """Run ``fn`` on the module's heads at every forward call until the handle is removed."""

    @abstractmethod
    def projections(self, module: nn.Module) -> HeadProjections:
        """Per-head views of the module's query, key, value and output weights."""


class _HookChain:
    """The callable the probe puts in a recframe layer's ``head_hook``: the active probes, in entry order."""

    def __init__(self, to_layout: Callable[[Tensor], Tensor],
                 from_layout: Callable[[Tensor, Tensor], Tensor]) -> None:
        self.fns: dict[int, HeadFn] = {}
        self._next = 0
        self.to_layout, self.from_layout = to_layout, from_layout

    def add(self, fn: HeadFn) -> int:
        self._next += 1
        self.fns[self._next] = fn
        return self._next

    def __call__(self, module: nn.Module, heads: Tensor) -> Tensor:
        z = self.to_layout(heads)
        for fn in list(self.fns.values()):
            z = fn(z)
        return self.from_layout(z, heads)


class _ChainHandle:
    def __init__(self, module: nn.Module, chain: _HookChain, token: int) -> None:
        self.module, self.chain, self.token = module, chain, token

    def remove(self) -> None:
        self.chain.fns.pop(self.token, None)
        if not self.chain.fns and self.module.head_hook is self.chain:
            self.module.head_hook = None


class _HeadHookKind(_Kind):
    """recframe's own layers: they call ``self.head_hook(self, heads)`` before the output projection."""

    layer: tuple[str, str]  # (module, class) of the layer, imported late: models may use the probe

    def matches(self, module: nn.Module) -> bool:
        return isinstance(module, getattr(importlib.import_module(self.layer[0]), self.layer[1]))

    def describe(self, module: nn.Module) -> tuple[int, int, int]:
        return module.n_heads, module.head_dim, getattr(module, "n_kv_heads", module.n_heads)

    def to_layout(self, heads: Tensor) -> Tensor:
        return heads

    def from_layout(self, z: Tensor, heads: Tensor) -> Tensor:
        return z

    def install(self, module: nn.Module, fn: HeadFn) -> _Handle:
        chain = module.head_hook
        if chain is None:
            chain = _HookChain(self.to_layout, self.from_layout)
            module.head_hook = chain
        elif not isinstance(chain, _HookChain):
            raise RuntimeError(f"{type(module).__name__}.head_hook holds {chain!r}, set outside "
                               "recframe.heads; use read_heads/scale_heads/patch_heads instead of setting it")
        return _ChainHandle(module, chain, chain.add(fn))


class _SASRecKind(_HeadHookKind):
    name, layer = "sasrec", ("recframe.models.layers", "CausalSelfAttention")

    def projections(self, module: nn.Module) -> HeadProjections:
        H, G, dh = module.n_heads, module.n_kv_heads, module.head_dim
        sizes = [H * dh, G * dh, G * dh]  # the fused qkv layer: [queries | keys | values], heads in order
        wq, wk, wv = module.qkv.weight.split(sizes)
        bq, bk, bv = module.qkv.bias.split(sizes)
        return HeadProjections(
            query=wq.view(H, dh, -1), key=wk.view(G, dh, -1), value=wv.view(G, dh, -1),
            output=_output_view(module.out.weight, H, dh),
            query_bias=bq.view(H, dh), key_bias=bk.view(G, dh), value_bias=bv.view(G, dh),
            output_bias=module.out.bias, kv_head=tuple(h // (H // G) for h in range(H)),
        )


class _RowKind(_HeadHookKind):
    name, layer = "row", ("recframe.models.generative.attention", "RowAttention")

    def to_layout(self, heads: Tensor) -> Tensor:  # [B, N, H, q, d_h] -> [B * N, H, q, d_h]
        return heads.flatten(0, 1)

    def from_layout(self, z: Tensor, heads: Tensor) -> Tensor:
        return z.reshape(heads.shape)

    def projections(self, module: nn.Module) -> HeadProjections:
        H, dh = module.n_heads, module.head_dim
        wk, wv = module.kv.weight.view(2, H, dh, -1).unbind(0)  # kv(x).view(..., 2, H, d_h): keys, values
        bk, bv = module.kv.bias.view(2, H, dh).unbind(0)
        return HeadProjections(
            query=module.q.weight.view(H, dh, -1), key=wk, value=wv,
            output=_output_view(module.out.weight, H, dh),
            query_bias=module.q.bias.view(H, dh), key_bias=bk, value_bias=bv,
            output_bias=module.out.bias, kv_head=tuple(range(H)),
        )


class _BertKind(_Kind):
    """Hugging Face BERT-style attention blocks: ``.self`` (query/key/value) and ``.output.dense``."""

    name = "hf-bert"

    def matches(self, module: nn.Module) -> bool:
        attn, out = getattr(module, "self", None), getattr(module, "output", None)
        return (isinstance(attn, nn.Module) and isinstance(getattr(out, "dense", None), nn.Linear)
                and all(isinstance(getattr(attn, p, None), nn.Linear) for p in ("query", "key", "value"))
                and isinstance(getattr(attn, "num_attention_heads", None), int)
                and isinstance(getattr(attn, "attention_head_size", None), int))

    def describe(self, module: nn.Module) -> tuple[int, int, int]:
        H = module.self.num_attention_heads
        return H, module.self.attention_head_size, H

    def install(self, module: nn.Module, fn: HeadFn) -> _Handle:
        H, dh = module.self.num_attention_heads, module.self.attention_head_size

        def hook(_: nn.Module, args: Any, output: Any) -> Any:
            context = output[0] if isinstance(output, tuple) else output  # [B, P, H * d_h]
            z = fn(context.view(*context.shape[:-1], H, dh).transpose(-3, -2))
            new = z.transpose(-3, -2).reshape(context.shape)
            return (new, *output[1:]) if isinstance(output, tuple) else new

        return module.self.register_forward_hook(hook)

    def projections(self, module: nn.Module) -> HeadProjections:
        H, dh = module.self.num_attention_heads, module.self.attention_head_size
        q, k, v, o = module.self.query, module.self.key, module.self.value, module.output.dense

        def bias(layer: nn.Linear) -> Tensor | None:
            return None if layer.bias is None else layer.bias.view(H, dh)

        return HeadProjections(
            query=q.weight.view(H, dh, -1), key=k.weight.view(H, dh, -1), value=v.weight.view(H, dh, -1),
            output=_output_view(o.weight, H, dh), query_bias=bias(q), key_bias=bias(k), value_bias=bias(v),
            output_bias=o.bias, kv_head=tuple(range(H)),
        )


def _output_view(weight: Tensor, H: int, dh: int) -> Tensor:
    """``[D_out, H * d_h]`` output projection as ``[H, D_out, d_h]``: the columns that read each head."""
    return weight.view(weight.shape[0], H, dh).permute(1, 0, 2)


_KINDS: tuple[_Kind, ...] = (_SASRecKind(), _RowKind(), _BertKind())


def _kind_of(module: nn.Module) -> _Kind | None:
    return next((kind for kind in _KINDS if kind.matches(module)), None)


# ----------------------------------------------------------------------------------------------- sites
def attention_sites(model: nn.Module) -> list[AttentionSite]:
    """Every attention module of ``model`` the probe reaches, in ``named_modules()`` order.

    Recognised: :class:`~recframe.models.layers.CausalSelfAttention`,
    :class:`~recframe.models.generative.attention.RowAttention` and Hugging Face BERT-style attention
    blocks (see the module docstring for each one's layout).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"attention_sites needs a torch.nn.Module, got {type(model).__name__}")
    sites = []
    for name, module in model.named_modules():
        kind = _kind_of(module)
        if kind is not None:
            n_heads, head_dim, n_kv = kind.describe(module)
            sites.append(AttentionSite(name, kind.name, int(n_heads), int(head_dim), int(n_kv), module))
    return sites


def _site_table(model: nn.Module) -> dict[str, AttentionSite]:
    return {site.name: site for site in attention_sites(model)}


def _known(table: Mapping[str, AttentionSite], model: nn.Module) -> str:
    if not table:
        return f"{type(model).__name__} has no attention site the probe knows (see recframe.heads)"
    names = ", ".join(repr(n) for n in list(table)[:12]) + (", ..." if len(table) > 12 else "")
    return f"the sites of {type(model).__name__} are {names} (see attention_sites(model))"


def _site(table: Mapping[str, AttentionSite], model: nn.Module, key: object) -> AttentionSite:
    name = key.name if isinstance(key, AttentionSite) else key
    if not isinstance(name, str):
        raise ValueError(f"an attention site is named by a string or an AttentionSite, got {key!r}; "
                         + _known(table, model))
    if name not in table:
        raise ValueError(f"no attention site named {name!r}; " + _known(table, model))
    site = table[name]
    if isinstance(key, AttentionSite) and key.module is not site.module:
        raise ValueError(f"AttentionSite {name!r} belongs to another model; list this model's sites with "
                         "attention_sites(model)")
    return site


def _head(site: AttentionSite, head: object) -> int:
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < site.n_heads:
        raise ValueError(f"head {head!r} is not a head of site {site.name!r}, which has {site.n_heads} heads "
                         f"(indices 0..{site.n_heads - 1})")
    return int(head)


def _pair(key: object) -> tuple[object, object]:
    if not (isinstance(key, tuple) and len(key) == 2):
        raise ValueError(f"a head is selected by a (site, head) pair, e.g. ('blocks.0.attn', 1); got {key!r}")
    return key


def _select(model: nn.Module,
            selection: Iterable[object] | None) -> dict[str, tuple[AttentionSite, list[int]]]:
    """``{site name: (site, sorted heads)}`` for a selection of ``(site, head)`` pairs or whole sites."""
    table = _site_table(model)
    if selection is None:
        if not table:
            raise ValueError(_known(table, model))
        return {name: (site, list(range(site.n_heads))) for name, site in table.items()}
    if isinstance(selection, (str, AttentionSite)) or (isinstance(selection, tuple) and len(selection) == 2
                                                       and isinstance(selection[1], int)):
        selection = [selection]
    chosen: dict[str, tuple[AttentionSite, set[int]]] = {}
    for item in selection:
        if isinstance(item, (str, AttentionSite)):
            site = _site(table, model, item)
            heads: Iterable[int] = range(site.n_heads)
        else:
            key, head = _pair(item)
            site = _site(table, model, key)
            heads = [_head(site, head)]
        chosen.setdefault(site.name, (site, set()))[1].update(heads)
    return {name: (site, sorted(heads)) for name, (site, heads) in chosen.items()}


def _keyed(model: nn.Module, values: Mapping[Any, Any], what: str) -> dict[str, tuple[AttentionSite, dict]]:
    """``{site name: (site, {head: value})}`` for a mapping keyed by ``(site, head)``."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{what} must be a mapping {{(site, head): value}}, got {type(values).__name__}")
    table = _site_table(model)
    out: dict[str, tuple[AttentionSite, dict]] = {}
    for key, value in values.items():
        site_key, head = _pair(key)
        site = _site(table, model, site_key)
        out.setdefault(site.name, (site, {}))[1][_head(site, head)] = value
    return out


@contextmanager
def _installed(fns: Iterable[tuple[AttentionSite, HeadFn]]) -> Iterator[None]:
    handles: list[_Handle] = []
    try:
        for site, fn in fns:
            handles.append(_kind_of(site.module).install(site.module, fn))
        yield
    finally:
        for handle in reversed(handles):
            handle.remove()


# --------------------------------------------------------------------------------------------- reading
class HeadCapture:
    """Head outputs captured by :func:`read_heads`: for each selected ``(site, head)``, one
    ``[batch, positions, head_dim]`` tensor per forward call of the site, in call order."""

    def __init__(self, sites: Mapping[str, AttentionSite], keys: Iterable[tuple[str, int]]) -> None:
        self._sites = dict(sites)
        self._calls: dict[tuple[str, int], list[Tensor]] = {key: [] for key in keys}

    def keys(self) -> list[tuple[str, int]]:
        """The captured ``(site name, head)`` pairs."""
        return list(self._calls)

    def _key(self, site: str | AttentionSite, head: int) -> tuple[str, int]:
        name = site.name if isinstance(site, AttentionSite) else site
        if (name, head) not in self._calls:
            raise KeyError(f"({name!r}, {head!r}) was not selected in read_heads; captured: {self.keys()}")
        return name, head

    def calls(self, site: str | AttentionSite, head: int) -> list[Tensor]:
        """Every captured output of one head, one ``[batch, positions, head_dim]`` tensor per call."""
        return list(self._calls[self._key(site, head)])

    def __getitem__(self, key: tuple[str | AttentionSite, int]) -> Tensor:
        """The output of one head when its site ran exactly once (else see :meth:`calls`)."""
        calls = self._calls[self._key(*_pair(key))]
        if len(calls) != 1:
            raise KeyError(f"site {key[0] if isinstance(key[0], str) else key[0].name!r} ran {len(calls)} "
                           "times inside read_heads; use capture.calls(site, head) for every call")
        return calls[0]

    def _recorder(self, name: str, heads: list[int], detach: bool) -> HeadFn:
        def record(z: Tensor) -> Tensor:
            for h in heads:
                self._calls[name, h].append(z[:, h].detach().clone() if detach else z[:, h])
            return z

        return record


@contextmanager
def read_heads(model: nn.Module, selection: Iterable[object] | None = None, *,
               detach: bool = True) -> Iterator[HeadCapture]:
    """Capture the outputs of the selected heads while the ``with`` block runs.

    Args:
        model: any module containing attention sites.
        selection: ``(site, head)`` pairs and/or whole sites (a site name or :class:`AttentionSite`);
            ``None`` selects every head of every site.
        detach: store detached copies (default); ``False`` keeps the live tensors, for gradients.

    Yields:
        a :class:`HeadCapture`, filled as the model runs.
    """
    chosen = _select(model, selection)
    capture = HeadCapture({n: s for n, (s, _) in chosen.items()},
                          [(name, h) for name, (_, heads) in chosen.items() for h in heads])
    with _installed((site, capture._recorder(name, heads, detach)) for name, (site, heads) in chosen.items()):
        yield capture


# -------------------------------------------------------------------------------------------- changing
def _factor(site: AttentionSite, head: int, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"the factor for head {head} of site {site.name!r} must be a finite real number, "
                         f"got {value!r}")
    return float(value)


@contextmanager
def scale_heads(model: nn.Module, factors: Mapping[tuple[str | AttentionSite, int], float]) -> Iterator[None]:
    """Multiply the selected heads' outputs by the given factors while the ``with`` block runs.

    ``z'[:, h] = factors[(site, h)] * z[:, h]`` before the output projection; other heads are untouched,
    and a factor of 1 changes nothing, bit for bit.

    Args:
        model: any module containing attention sites.
        factors: ``{(site, head): factor}``; ``0.0`` knocks a head out.
    """
    chosen = _keyed(model, factors, "factors")

    def scaler(site: AttentionSite, by_head: dict[int, Any]) -> HeadFn:
        values = [1.0] * site.n_heads
        for h, value in by_head.items():
            values[h] = _factor(site, h, value)

        def scale(z: Tensor) -> Tensor:
            return z * torch.tensor(values, dtype=z.dtype, device=z.device).view(1, -1, 1, 1)

        return scale

    with _installed((site, scaler(site, by_head)) for site, by_head in chosen.values()):
        yield


def _patcher(site: AttentionSite, patches: dict[int, Patch]) -> HeadFn:
    for h, patch in patches.items():
        if not (isinstance(patch, Tensor) or callable(patch)
                or (isinstance(patch, Sequence) and all(isinstance(t, Tensor) for t in patch))):
            raise ValueError(f"the patch for head {h} of site {site.name!r} must be a tensor [batch, "
                             "positions, head_dim], a list of them (one per forward call) or a function; "
                             f"got {type(patch).__name__}")
    state = {"call": 0}

    def patch(z: Tensor) -> Tensor:
        call = state["call"]
        state["call"] += 1
        slices = list(z.unbind(1))
        for h, given in patches.items():
            if isinstance(given, Tensor):
                new = given
            elif callable(given):
                new = given(slices[h])
            else:
                if call >= len(given):
                    raise ValueError(f"the patch for head {h} of site {site.name!r} holds {len(given)} "
                                     f"tensors (one per forward call) but the site runs a call {call + 1}")
                new = given[call]
            if not isinstance(new, Tensor) or new.shape != slices[h].shape:
                got = tuple(new.shape) if isinstance(new, Tensor) else type(new).__name__
                raise ValueError(f"the patch for head {h} of site {site.name!r} (call {call + 1}) is {got}, "
                                 f"but the head's output is {tuple(slices[h].shape)} "
                                 "([batch, positions, head_dim])")
            slices[h] = new.to(dtype=z.dtype, device=z.device)
        return torch.stack(slices, 1)

    return patch


@contextmanager
def patch_heads(model: nn.Module, patches: Mapping[tuple[str | AttentionSite, int], Patch]) -> Iterator[None]:
    """Replace the selected heads' outputs while the ``with`` block runs.

    Args:
        model: any module containing attention sites.
        patches: ``{(site, head): patch}``, where a patch is a tensor ``[batch, positions, head_dim]`` used at
            every forward call, a sequence of such tensors used one per call in order (what
            :meth:`HeadCapture.calls` returns), or a function ``head -> head`` on the head's current output.
            A shape that does not match the head's output is an error naming the site, head and call.
    """
    chosen = _keyed(model, patches, "patches")
    with _installed((site, _patcher(site, by_head)) for site, by_head in chosen.values()):
        yield


# --------------------------------------------------------------------------------------------- weights
def _only_site(model: nn.Module, site: str | AttentionSite | None) -> AttentionSite:
    table = _site_table(model)
    if site is not None:
        return _site(table, model, site)
    if len(table) != 1:
        raise ValueError(f"{type(model).__name__} has {len(table)} attention sites; name one: "
                         + _known(table, model))
    return next(iter(table.values()))


def head_projections(model: nn.Module, site: str | AttentionSite | None = None) -> HeadProjections:
    """Per-head views of one site's query, key, value and output weights (see :class:`HeadProjections`).

    Args:
        model: a module containing attention sites (or one attention module).
        site: the site; may be omitted when ``model`` has exactly one.
    """
    found = _only_site(model, site)
    return _kind_of(found.module).projections(found.module)


def head_value_output_maps(model: nn.Module, site: str | AttentionSite | None = None,
                           dtype: torch.dtype = torch.float64) -> Tensor:
    """Each head's value path ``M_h = W_O^h W_V^{g(h)}`` as a ``[H, D_out, D_in]`` tensor (detached).

    ``W_V^{g}`` (``[d_h, D_in]``) is the value projection of the key/value head ``g(h)`` that query head
    ``h`` reads and ``W_O^h`` (``[D_out, d_h]``) the columns of the output projection that read head ``h``.
    When head ``h`` puts all its attention on token ``j``, its contribution to the site's output is
    ``M_h x_j`` plus biases; ``sum_h M_h`` is the layer's effective value matrix.

    Args:
        model: a module containing attention sites (or one attention module).
        site: the site; may be omitted when ``model`` has exactly one.
        dtype: the dtype the products are computed and returned in.
    """
    proj = head_projections(model, site)
    value = proj.value.detach().to(dtype)[list(proj.kv_head)]  # [H, d_h, D_in]
    return proj.output.detach().to(dtype) @ value
