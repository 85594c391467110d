"""A Llama-style decoder with its KV cache in buffers, shared by the LLM decode test and benchmark.

RMSNorm, rotary positions (computed from the positions in the graph, no tables), grouped-query
attention, SwiGLU feed-forward, tied or untied head. Each layer keeps `k_cache` / `v_cache`
buffers of shape [1, kv_heads, max_len, head_dim], written in place at the positions given as
input (`index_copy_`, or slice assignment whose bounds torch derives from the input sizes), so a
converted program holds them as iOS18 states.

forward(ids [1, T] int64, p) -> logits [1, T, vocab]:
  mode "index_copy": p holds the T positions (int64);
  mode "slice": p is a [T, end] tensor read only for its shape, the tokens go to [end - T, end).

`export_pt2` writes the prefill (T tokens) and decode (1 token) programs as .pt2 archives; with
`lazy=True` the model is exported under a FakeTensorMode (no weight memory at all) and the
archive's weights are written tensor by tensor from a seeded generator, so an 8B model's .pt2 is
written holding one tensor at a time. `build_model` makes the same weights in memory (layer by
layer) for the eager / ONNX references.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from typing import Any, Callable, Dict, Iterator, Tuple

__all__ = ["Config", "PRESETS", "Llama", "build_model", "export_programs", "export_pt2", "positions",
           "weight_tensor", "weight_specs", "param_count",
           "functional_step"]


@dataclasses.dataclass(frozen=True)
class Config:
    """The decoder's shape."""

    layers: int = 2
    hidden: int = 64
    ffn: int = 128
    heads: int = 4
    kv_heads: int = 2
    vocab: int = 128
    max_len: int = 64
    tied: bool = False
    rope_theta: float = 500000.0
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


PRESETS: Dict[str, Config] = {
    "tiny": Config(),
    # Qwen2.5-0.5B-like shape (0.49B parameters, tied head)
    "0.5b": Config(layers=24, hidden=896, ffn=4864, heads=14, kv_heads=2, vocab=151936, max_len=256, tied=True),
    # TinyLlama-1.1B shape
    "1b": Config(layers=22, hidden=2048, ffn=5632, heads=32, kv_heads=4, vocab=32000, max_len=256),
    # Llama-3-8B shape
    "8b": Config(layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, vocab=128256, max_len=256),
}


def _torch() -> Any:
    import torch

    return torch


def positions(mode: str, start: int, t: int) -> Any:
    """The forward's second input for `t` new tokens from position `start`."""
    torch = _torch()
    if mode == "slice":
        return torch.zeros(t, start + t)
    return torch.arange(start, start + t)


@functools.cache
def _modules() -> Tuple[type, ...]:
    torch = _torch()
    import torch.nn.functional as F
    from torch import nn

    def rope(x: Any, pos: Any, theta: float) -> Any:
        hd = x.shape[-1]
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = pos.to(torch.float32)[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
        sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class RMSNorm(nn.Module):
        def __init__(self, dim: int, eps: float) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x: Any) -> Any:
            xf = x.to(torch.float32)
            xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return xf.to(x.dtype) * self.weight

    class Block(nn.Module):
        def __init__(self, c: Config, mode: str) -> None:
            super().__init__()
            self.c, self.mode = c, mode
            hd = c.head_dim
            self.attn_norm = RMSNorm(c.hidden, c.eps)
            self.q = nn.Linear(c.hidden, c.heads * hd, bias=False)
            self.k = nn.Linear(c.hidden, c.kv_heads * hd, bias=False)
            self.v = nn.Linear(c.hidden, c.kv_heads * hd, bias=False)
            self.o = nn.Linear(c.heads * hd, c.hidden, bias=False)
            self.ffn_norm = RMSNorm(c.hidden, c.eps)
            self.gate = nn.Linear(c.hidden, c.ffn, bias=False)
            self.up = nn.Linear(c.hidden, c.ffn, bias=False)
            self.down = nn.Linear(c.ffn, c.hidden, bias=False)
            self.register_buffer("k_cache", torch.zeros(1, c.kv_heads, c.max_len, hd))
            self.register_buffer("v_cache", torch.zeros(1, c.kv_heads, c.max_len, hd))

        def forward(self, x: Any, pos: Any, start: Any, end: Any, cache: Any = None) -> Any:
            c, t = self.c, x.shape[1]
            hd = c.head_dim
            h = self.attn_norm(x)
            q = self.q(h).view(1, t, c.heads, hd).transpose(1, 2)
            k = self.k(h).view(1, t, c.kv_heads, hd).transpose(1, 2)
            v = self.v(h).view(1, t, c.kv_heads, hd).transpose(1, 2)
            q, k = rope(q, pos, c.rope_theta), rope(k, pos, c.rope_theta)
            if cache is not None:  # functional: the caches come in and go out
                kc0 = cache[0].index_copy(2, pos, k.to(cache[0].dtype))
                vc0 = cache[1].index_copy(2, pos, v.to(cache[1].dtype))
            elif self.mode == "slice":
                self.k_cache[:, :, start:end] = k.to(self.k_cache.dtype)
                self.v_cache[:, :, start:end] = v.to(self.v_cache.dtype)
            else:
                self.k_cache.index_copy_(2, pos, k.to(self.k_cache.dtype))
                self.v_cache.index_copy_(2, pos, v.to(self.v_cache.dtype))
            if cache is None:
                kc0, vc0 = self.k_cache, self.v_cache
            kc = kc0.to(x.dtype).repeat_interleave(c.heads // c.kv_heads, dim=1)
            vc = vc0.to(x.dtype).repeat_interleave(c.heads // c.kv_heads, dim=1)
            mask = torch.arange(c.max_len)[None, :] <= pos[:, None]
            att = (q @ kc.transpose(-1, -2)) * (hd ** -0.5)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            x = x + self.o((att @ vc).transpose(1, 2).reshape(1, t, c.heads * hd))
            h = self.ffn_norm(x)
            x = x + self.down(F.silu(self.gate(h)) * self.up(h))
            return x if cache is None else (x, kc0, vc0)

    class Llama(nn.Module):
        def __init__(self, c: Config, mode: str = "index_copy") -> None:
            super().__init__()
            self.c, self.mode = c, mode
            self.embed = nn.Embedding(c.vocab, c.hidden)
            self.layers = nn.ModuleList([Block(c, mode) for _ in range(c.layers)])
            self.norm = RMSNorm(c.hidden, c.eps)
            self.head = None if c.tied else nn.Linear(c.hidden, c.vocab, bias=False)

        def forward(self, ids: Any, p: Any) -> Any:
            t = ids.shape[1]
            if self.mode == "slice":
                end = p.shape[-1]
                start = end - t
                pos = torch.arange(start, end)
            else:
                pos, start, end = p, None, None
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x, pos, start, end)
            return self.logits(x)

        def logits(self, x: Any) -> Any:
            w = self.embed.weight if self.head is None else self.head.weight
            return F.linear(self.norm(x), w)

    class FunctionalStep(nn.Module):
        """forward(ids, pos, k_0, v_0, k_1, ...) -> (logits, new k_0, new v_0, ...): the decoder
        with its caches as inputs and outputs (for exporters without states, e.g. ONNX)."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: Any, pos: Any, *caches: Any) -> Any:
            m = self.model
            x = m.embed(ids)
            out = []
            for i, layer in enumerate(m.layers):
                x, kc, vc = layer(x, pos, None, None, (caches[2 * i], caches[2 * i + 1]))
                out += [kc, vc]
            return (m.logits(x), *out)

    return Llama, Block, FunctionalStep


def Llama(c: Config, mode: str = "index_copy") -> Any:  # noqa: N802 - a class factory
    """An uninitialised-weights decoder (torch's default init) of shape `c`."""
    return _modules()[0](c, mode)


def functional_step(model: Any) -> Any:
    """`model` with its caches as inputs and outputs (see FunctionalStep), sharing its weights."""
    return _modules()[2](model)


def param_count(c: Config) -> int:
    """The number of weights (without the KV cache buffers)."""
    hd = c.head_dim
    per = 2 * c.hidden + c.hidden * hd * (2 * c.heads + 2 * c.kv_heads) + 3 * c.hidden * c.ffn
    return c.layers * per + c.hidden + c.vocab * c.hidden * (1 if c.tied else 2)


def weight_specs(c: Config) -> Iterator[Tuple[str, Tuple[int, ...]]]:
    """(name, shape) of every parameter, in module order."""
    hd = c.head_dim
    yield "embed.weight", (c.vocab, c.hidden)
    for i in range(c.layers):
        p = f"layers.{i}."
        yield p + "attn_norm.weight", (c.hidden,)
        yield p + "q.weight", (c.heads * hd, c.hidden)
        yield p + "k.weight", (c.kv_heads * hd, c.hidden)
        yield p + "v.weight", (c.kv_heads * hd, c.hidden)
        yield p + "o.weight", (c.hidden, c.heads * hd)
        yield p + "ffn_norm.weight", (c.hidden,)
        yield p + "gate.weight", (c.ffn, c.hidden)
        yield p + "up.weight", (c.ffn, c.hidden)
        yield p + "down.weight", (c.hidden, c.ffn)
    yield "norm.weight", (c.hidden,)
    if not c.tied:
        yield "head.weight", (c.vocab, c.hidden)


def weight_tensor(name: str, shape: Tuple[int, ...], dtype: Any, seed: int = 0) -> Any:
    """The weight `name`, the same for a seed whatever else is made: norms near 1, matrices
    uniform with std 1/sqrt(fan_in) (embedding std 1)."""
    torch = _torch()
    import zlib

    g = torch.Generator().manual_seed(seed * 1000003 + zlib.crc32(name.encode()))

    def fill(w: Any) -> Any:  # in place, on an fp32 tensor of random numbers
        if len(shape) == 1:
            return w.sub_(0.5).mul_(0.1).add_(1.0)
        scale = 1.0 if name == "embed.weight" else shape[1] ** -0.5
        return w.mul_(2).sub_(1).mul_(scale * 3 ** 0.5)

    rows = max(1, (1 << 24) // max(1, math.prod(shape[1:])))
    if len(shape) == 1 or shape[0] <= rows:
        return fill(torch.rand(shape, generator=g)).to(dtype)
    # large matrices (an 8B model's embedding is 2.1 GB in fp32) row block by row block into the
    # result: the generator gives the same numbers in blocks as at once
    out = torch.empty(shape, dtype=dtype)
    for r in range(0, shape[0], rows):
        n = min(rows, shape[0] - r)
        out[r:r + n] = fill(torch.rand((n, *shape[1:]), generator=g))
    return out


def build_model(c: Config, dtype: Any = None, mode: str = "index_copy", seed: int = 0,
                cache_dtype: Any = None) -> Any:
    """The decoder in eval mode with `weight_tensor` weights in `dtype` (fp32 by default), made on
    the meta device and filled one tensor at a time (peak memory is the weights plus one fp32
    tensor). The KV caches are in `cache_dtype` (fp32 by default)."""
    torch = _torch()
    dtype = dtype or torch.float32
    with torch.device("meta"):
        m = Llama(c, mode)
    m = m.to_empty(device="cpu").eval()
    with torch.no_grad():
        params = dict(m.named_parameters())
        for name, shape in weight_specs(c):
            params[name].data = weight_tensor(name, shape, dtype, seed)
        for layer in m.layers:
            for b in ("k_cache", "v_cache"):
                setattr(layer, b, torch.zeros(getattr(layer, b).shape, dtype=cache_dtype or torch.float32))
    return m


def export_programs(model: Any, prefill: int, programs: Tuple[str, ...] = ("prefill", "decode")) -> Dict[str, Any]:
    """{"prefill": T = `prefill` tokens, "decode": 1 token} exported from `model` (static shapes;
    the model's caches are not touched), those named in `programs`."""
    torch = _torch()
    import copy

    out = {}
    for name, t in (("prefill", prefill), ("decode", 1)):
        if name not in programs:
            continue
        m = copy.deepcopy(model) if _is_real(model) else model
        ids = torch.zeros(1, t, dtype=torch.int64)
        # slice mode: the end position is the second input's last size, free up to max_len
        ds = {"ids": None, "p": {1: torch.export.Dim(f"E{t}", min=t, max=model.c.max_len)}} \
            if model.mode == "slice" else None
        out[name] = torch.export.export(m, (ids, positions(model.mode, t, t)), dynamic_shapes=ds, strict=False)
    return out


def _is_real(model: Any) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    p = next(model.parameters())
    return not is_fake(p) and p.device.type != "meta"


def _fake_programs(c: Config, dtype: Any, mode: str, prefill: int, programs: Tuple[str, ...]) -> Dict[str, Any]:
    """The two programs exported from a decoder whose weights are fake tensors (no memory)."""
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.device("meta"):
        m = Llama(c, mode).eval()
    with FakeTensorMode(allow_non_fake_inputs=True):
        for mod in m.modules():
            for k, p in mod._parameters.items():
                if p is not None:
                    mod._parameters[k] = torch.nn.Parameter(torch.empty(p.shape, dtype=dtype), requires_grad=False)
            for k, b in mod._buffers.items():
                mod._buffers[k] = torch.empty(b.shape, dtype=torch.float32)
    return export_programs(m, prefill, programs)  # real example inputs: torch.export finds the weights' fake mode


def _write_archive(path: str, ep: Any, weight_of: Callable[[str, Any], Any]) -> None:
    """Writes `ep` as torch.export.save does (models/model.json, data/weights/weight_N and
    data/weights/model_weights_config.json), each weight made by `weight_of(name, meta)` just
    before it is written and dropped after."""
    torch = _torch()
    from torch._export.serde import schema
    from torch._export.serde.serialize import _dataclass_to_dict, serialize, serialize_tensor_meta
    from torch.export.pt2_archive import _package as pkg
    from torch.export.pt2_archive.constants import (
        CONSTANTS_CONFIG_FILENAME_FORMAT,
        MODELS_FILENAME_FORMAT,
        SAMPLE_INPUTS_FILENAME_FORMAT,
        WEIGHT_FILENAME_PREFIX,
        WEIGHTS_CONFIG_FILENAME_FORMAT,
        WEIGHTS_DIR,
    )

    if ep.constants:
        raise ValueError(f"lazy writing handles weights only; the program has constants {list(ep.constants)}")
    config = {}
    with pkg.PT2ArchiveWriter(path) as w:
        for i, (fqn, meta) in enumerate(ep.state_dict.items()):
            t = weight_of(fqn, meta).contiguous()
            # from the tensor's memory, as torch.save writes storages (write_bytes would take a
            # bytes copy: another 1 GB for an 8B model's embedding)
            w.archive_file.write_record(os.path.join(WEIGHTS_DIR, f"{WEIGHT_FILENAME_PREFIX}{i}"), t.data_ptr(),
                                        t.untyped_storage().nbytes())
            config[fqn] = schema.PayloadMeta(path_name=f"{WEIGHT_FILENAME_PREFIX}{i}",
                                             is_param=isinstance(meta, torch.nn.Parameter), use_pickle=False,
                                             tensor_meta=serialize_tensor_meta(t))
            del t
        w.write_string(WEIGHTS_CONFIG_FILENAME_FORMAT.format("model"),
                       json.dumps(_dataclass_to_dict(schema.PayloadConfig(config=config))))
        w.write_string(CONSTANTS_CONFIG_FILENAME_FORMAT.format("model"),
                       json.dumps(_dataclass_to_dict(schema.PayloadConfig(config={}))))
        art = serialize(ep, serialize_state_dict=False, serialize_constants=False)
        w.write_bytes(MODELS_FILENAME_FORMAT.format("model"), art.exported_program)
        w.write_bytes(SAMPLE_INPUTS_FILENAME_FORMAT.format("model"), art.example_inputs)


def export_pt2(c: Config, out_dir: str, dtype: Any = None, mode: str = "index_copy", prefill: int = 128,
               seed: int = 0, lazy: bool = True, model: Any = None,
               programs: Tuple[str, ...] = ("prefill", "decode")) -> Dict[str, Any]:
    """Writes `out_dir`/prefill.pt2 and `out_dir`/decode.pt2 (those in `programs`; weights `weight_tensor(seed)` in
    `dtype`, fp16 by default; fp32 caches, which become fp16 states). lazy: export under a
    FakeTensorMode and write weight by weight; else from `model` (or `build_model`) with
    torch.export.save. Returns {"prefill": path, "decode": path, "seconds": {...}}."""
    torch = _torch()
    dtype = dtype or torch.float16
    os.makedirs(out_dir, exist_ok=True)
    secs = {}
    t0 = time.perf_counter()
    if lazy:
        eps = _fake_programs(c, dtype, mode, prefill, programs)
    else:
        model = model if model is not None else build_model(c, dtype, mode, seed)
        eps = export_programs(model, prefill, programs)
    secs["export"] = time.perf_counter() - t0
    paths: Dict[str, Any] = {}
    for name, ep in eps.items():
        path = os.path.join(out_dir, f"{name}.pt2")
        t0 = time.perf_counter()
        if lazy:
            def weight_of(fqn: str, meta: Any) -> Any:
                if fqn.endswith("_cache"):
                    return torch.zeros(meta.shape, dtype=meta.dtype)
                return weight_tensor(fqn, tuple(meta.shape), meta.dtype, seed)

            _write_archive(path, ep, weight_of)
        else:
            torch.export.save(ep, path)
        secs[f"write_{name}"] = time.perf_counter() - t0
        paths[name] = path
    paths["seconds"] = secs
    return paths
