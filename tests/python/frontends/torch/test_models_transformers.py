"""torch.export importer on transformer models, numbers against torch eager.

HF transformers GPT-2, BERT and a Llama decoder built from small configs with random weights (no
downloads), exported with a dynamic sequence length and checked at two lengths; a Llama-style
decoder whose KV cache lives in registered buffers written in place (index_copy_, the
torch.ops.aten.index_copy_ overload, slice assignment at sizes derived from the inputs), which
become iOS18 states run over several predictions. Each program is converted in both dialects:
TRAINING as torch.export.export returns it (in-place ops, views, higher-order ops) and core ATen
after run_decompositions() (functional ops, buffer mutations as outputs).

fp32 within 1e-4 relative (max abs diff / max abs reference), FLOAT16 within 1e-2.
"""

import copy
import json
import re

import milkit
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.filterwarnings("ignore")

FP32 = milkit.precision.FLOAT32
FP16 = milkit.precision.FLOAT16
TOL = {FP32: 1e-4, FP16: 1e-2}


def rel(out, ref):
    ref = np.asarray(ref, dtype=np.float32)
    return float(np.abs(np.asarray(out, dtype=np.float32) - ref).max() / np.abs(ref).max())


def convert(ep, precision=FP32):
    return milkit.convert(ep, compute_precision=precision, minimum_deployment_target=milkit.target.iOS18)


def mil_text(mm):
    return mm.get_program().functions["main"].to_str()


# ---- HF transformers --------------------------------------------------------------------------

def gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def bert():
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                  intermediate_size=128, vocab_size=128, max_position_embeddings=64)
    return transformers.BertModel(cfg)


def llama():
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                                   max_position_embeddings=64, bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg)


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama}
_exported = {}


def exported(name):
    """(eager model, {dialect: ExportedProgram}), exported once per module run."""
    if name not in _exported:
        torch.manual_seed(0)
        model = MODELS[name]().eval()
        ids = torch.randint(0, 128, (1, 8))
        seq = torch.export.Dim("seq", max=32)
        if name == "bert":  # with a padding mask (GPT-2 and Llama without: transformers' other mask path)
            ep = torch.export.export(model, (ids,), kwargs={"attention_mask": padding_mask(8)},
                                     dynamic_shapes={"input_ids": {1: seq}, "attention_mask": {1: seq}}, strict=False)
        else:
            ep = torch.export.export(model, (ids,), kwargs={"use_cache": False},
                                     dynamic_shapes={"input_ids": {1: seq}, "use_cache": None}, strict=False)
        _exported[name] = (model, {"training": ep, "core": ep.run_decompositions()})
    return _exported[name]


def padding_mask(t):
    """An attention mask with the first 3 tokens padded (their query rows see no key)."""
    m = torch.ones(1, t, dtype=torch.long)
    m[0, :3] = 0
    return m


def feed(name, ids):
    f = {"input_ids": ids.numpy().astype(np.int32)}
    if name == "bert":
        f["attention_mask"] = padding_mask(ids.shape[1]).numpy().astype(np.int32)
    return f


def eager(model, name, ids):
    with torch.no_grad():
        if name == "bert":
            r = model(ids, attention_mask=padding_mask(ids.shape[1]))
            return [r.last_hidden_state.numpy(), r.pooler_output.numpy()]
        return [model(ids, use_cache=False).logits.numpy()]


@pytest.mark.parametrize("dialect", ["training", "core"])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_hf_dynamic_seq(name, dialect):
    model, eps = exported(name)
    ep = eps[dialect]
    mm = convert(ep)
    text = mil_text(mm)
    # the sequence length stays one symbol from the input through the program (no fresh symbols)
    sym = re.search(r"%input_ids: \(1, (s\d+), int32\)", text)
    assert sym, text.splitlines()[0]
    assert not re.search(r"\bis\d+\b", text)
    for t in (8, 13):
        ids = torch.randint(0, 128, (1, t))
        refs = eager(model, name, ids)
        outs = list(mm.predict(feed(name, ids)).values())
        assert len(outs) == len(refs)
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            assert rel(o, r) < TOL[FP32], (name, dialect, t, rel(o, r))


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_gpt2_fp16(dialect):
    model, eps = exported("gpt2")
    mm = convert(eps[dialect], FP16)
    for t in (5, 16):
        ids = torch.randint(0, 128, (1, t))
        out = list(mm.predict({"input_ids": ids.numpy().astype(np.int32)}).values())[0]
        assert rel(out, eager(model, "gpt2", ids)[0]) < TOL[FP16]


class DerivedSizes(nn.Module):
    """Sizes torch derives from two input symbols: 2*s0, s0 + 1, s0 + s1, sym_size arithmetic."""

    def forward(self, x, y):
        n = x.shape[1]
        a = torch.cat([x, x], dim=1)
        b = a.reshape(1, n, 2, 4).sum(2)
        d = F.pad(x, (0, 0, 1, 0))[:, 1:] + b
        e = torch.arange(n * 2, dtype=torch.float32)[None, :, None]
        f = (a * e)[:, :n] + d
        g = torch.full((1, n + 1, 4), 0.5)
        h = torch.cat([f, y], 1)
        return f, g, h.mean(1, keepdim=True) * n, h.new_zeros(h.shape[1], 2) + h.shape[1]


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_derived_sizes(dialect):
    s, u = torch.export.Dim("S", min=2, max=64), torch.export.Dim("U", max=64)
    ep = torch.export.export(DerivedSizes(), (torch.randn(1, 5, 4), torch.randn(1, 3, 4)),
                             dynamic_shapes={"x": {1: s}, "y": {1: u}})
    if dialect == "core":
        ep = ep.run_decompositions()
    mm = convert(ep)
    text = mil_text(mm)
    x_sym = re.search(r"%x: \(1, (s\d+), 4", text).group(1)
    y_sym = re.search(r"%y: \(1, (s\d+), 4", text).group(1)
    assert not re.search(r"\bis\d+\b", text)
    for dim in (f"2*{x_sym}", f"{x_sym} + 1", f"{x_sym} + {y_sym}"):
        assert f"({dim}," in text or f", {dim}," in text, dim
    for a, b in ((5, 3), (9, 1)):
        x, y = torch.randn(1, a, 4), torch.randn(1, b, 4)
        refs = DerivedSizes()(x, y)
        outs = list(mm.predict({"x": x.numpy(), "y": y.numpy()}).values())
        for o, r in zip(outs, refs):
            assert o.shape == tuple(r.shape)
            assert rel(o, r.numpy()) < TOL[FP32]


class PaddedAttention(nn.Module):
    """SDPA with a bool key-padding mask that hides every key from the padded queries."""

    def forward(self, q, keep):
        m = keep[:, None, None, :] & keep[:, None, :, None]
        return F.scaled_dot_product_attention(q, q, q, attn_mask=m)


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_sdpa_fully_masked_rows(dialect):
    # torch gives 0 for a query row whose keys are all masked (core: _safe_softmax); not NaN
    q = torch.randn(1, 2, 6, 8)
    keep = torch.tensor([[False, False, True, True, True, True]])
    ep = torch.export.export(PaddedAttention(), (q, keep))
    if dialect == "core":
        ep = ep.run_decompositions()
        assert any("_safe_softmax" in str(n.target) or "any" in str(n.target) for n in ep.graph.nodes)
    ref = PaddedAttention()(q, keep).numpy()
    assert np.all(ref[:, :, :2] == 0)
    out = list(convert(ep).predict({"q": q.numpy(), "keep": keep.numpy()}).values())[0]
    assert not np.isnan(out).any()
    assert rel(out, ref) < TOL[FP32]


class RotaryNoGrad(nn.Module):
    """A rotary embedding computed under torch.no_grad, as transformers' Llama did (newer
    transformers releases dropped the decorator, so the module is built here)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)), persistent=False)

    def forward(self, x):
        with torch.no_grad():
            t = torch.arange(x.shape[1], dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat([freqs, freqs], -1)
            cos, sin = emb.cos(), emb.sin()
        h = self.lin(x)
        rot = torch.cat([-h[..., 4:], h[..., :4]], -1)
        return h * cos + rot * sin


def test_training_dialect_keeps_higher_order_ops():
    # a torch.no_grad region stays in TRAINING as the wrap_with_set_grad_enabled higher-order op
    # with a subgraph, which milkit converts inline
    seq = torch.export.Dim("seq", min=2, max=32)
    ep = torch.export.export(RotaryNoGrad().eval(), (torch.randn(1, 6, 8),), dynamic_shapes=({1: seq},), strict=False)
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("wrap_with_set_grad_enabled" in t for t in targets)
    mm = convert(ep)
    for t in (6, 11):
        x = torch.randn(1, t, 8)
        with torch.no_grad():
            ref = ep.module()(x)
        assert rel(list(mm.predict({"x": x.numpy()}).values())[0], ref) < TOL[FP32]
    # the causal mask's packed-sequence check uses aten.diff in both dialects of transformers' Llama
    _, eps = exported("llama")
    assert any("diff" in str(n.target) for n in eps["training"].graph.nodes if n.op == "call_function")


class Autocast(nn.Module):
    def __init__(self, enabled):
        super().__init__()
        self.lin, self.enabled = nn.Linear(4, 4), enabled

    def forward(self, x):
        with torch.autocast("cpu", enabled=self.enabled):  # rotary embeddings disable it like this
            y = self.lin(x).cos()
        return y * 2


def test_autocast_regions():
    ep = torch.export.export(Autocast(False).eval(), (torch.randn(2, 4),))
    assert any("wrap_with_autocast" in str(n.target) for n in ep.graph.nodes)
    x = torch.randn(2, 4)
    out = list(convert(ep).predict({"x": x.numpy()}).values())[0]
    assert rel(out, ep.module()(x).detach().numpy()) < TOL[FP32]
    # an enabled region (bf16 on CPU) converts and computes in the program's precision, as Core
    # ML's precision is set by convert(compute_precision=): it matches the fp32 model, and eager
    # autocast within bf16's rounding
    m = Autocast(True).eval()
    ep = torch.export.export(m, (torch.randn(2, 4),))
    out = list(convert(ep).predict({"x": x.numpy()}).values())[0]
    m.enabled = False
    assert rel(out, m(x).detach().numpy()) < TOL[FP32]
    m.enabled = True
    assert rel(out, m(x).float().detach().numpy()) < 2e-2


# ---- a Llama-style decoder with a KV cache in buffers --------------------------------------------

def rope(x, pos, base=10000.0):
    d = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    f = pos.float()[:, None] * inv[None, :]
    emb = torch.cat([f, f], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()


class Layer(nn.Module):
    def __init__(self, dim, heads, kv_heads, max_len, mode):
        super().__init__()
        self.h, self.kvh, self.hd, self.mode = heads, kv_heads, dim // heads, mode
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.n1, self.n2 = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)
        self.gate = nn.Linear(dim, 2 * dim, bias=False)
        self.up = nn.Linear(dim, 2 * dim, bias=False)
        self.down = nn.Linear(2 * dim, dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, kv_heads, max_len, self.hd))
        self.register_buffer("v_cache", torch.zeros(1, kv_heads, max_len, self.hd))

    def forward(self, x, pos, start, end):
        t = x.shape[1]
        h = self.n1(x)
        q = self.q(h).view(1, t, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(1, t, self.kvh, self.hd).transpose(1, 2)
        v = self.v(h).view(1, t, self.kvh, self.hd).transpose(1, 2)
        q, k = rope(q, pos), rope(k, pos)
        if self.mode == "index_copy_":
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
        elif self.mode == "aten.index_copy_":
            torch.ops.aten.index_copy_(self.k_cache, 2, pos, k)
            torch.ops.aten.index_copy_(self.v_cache, 2, pos, v)
        else:
            self.k_cache[:, :, start:end] = k
            self.v_cache[:, :, start:end] = v
        if self.mode == "slice":
            kc, vc, n = self.k_cache[:, :, :end], self.v_cache[:, :, :end], end
        else:
            kc, vc, n = self.k_cache, self.v_cache, self.k_cache.shape[2]
        kc = kc.repeat_interleave(self.h // self.kvh, dim=1)
        vc = vc.repeat_interleave(self.h // self.kvh, dim=1)
        mask = torch.arange(n)[None, :] <= pos[:, None]
        att = (q @ kc.transpose(-1, -2)) / (self.hd ** 0.5)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.o((att @ vc).transpose(1, 2).reshape(1, t, -1))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class KVDecoder(nn.Module):
    """Decoder layers (one by default), GQA (4 heads, 2 KV heads), rotary positions, KV cache in
    buffers.

    'index_copy_' / 'aten.index_copy_': forward(ids, p) with p the positions of the new tokens.
    'slice': forward(ids, p) with p a [T, end] tensor read only for its shape: the new tokens go
    to [end - T, end), sizes torch derives from the two input symbols."""

    def __init__(self, mode, vocab=64, dim=32, heads=4, kv_heads=2, max_len=16, layers=1):
        super().__init__()
        self.mode = mode
        self.emb = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Layer(dim, heads, kv_heads, max_len, mode) for _ in range(layers)])
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids, p):
        t = ids.shape[1]
        if self.mode == "slice":
            end = p.shape[-1]
            start = end - t
            pos = torch.arange(start, end)
        else:
            pos, start, end = p, None, None
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x, pos, start, end)
        return self.head(self.norm(x))


def positions(mode, pos, t):
    return torch.arange(pos, pos + t) if mode != "slice" else torch.zeros(t, pos + t)


_kv = {}


def kv_exported(mode):
    if mode not in _kv:
        torch.manual_seed(1)
        model = KVDecoder(mode).eval()
        seq = torch.export.Dim("T", max=15)
        ds = {"ids": {1: seq}, "p": {0: seq}}
        if mode == "slice":
            ds["p"][1] = torch.export.Dim("E", max=15)
        ep = torch.export.export(copy.deepcopy(model), (torch.randint(0, 64, (1, 3)), positions(mode, 0, 3)),
                                 dynamic_shapes=ds, strict=False)
        _kv[mode] = (model, {"training": ep, "core": ep.run_decompositions()})
    return _kv[mode]


def run_steps(mm, model, mode, precision, steps=(3, 1, 1, 2, 1)):
    """Predicts step by step with one state; the reference is the eager model whose buffers are
    rounded to fp16 after each step (Core ML keeps states in fp16 between predictions)."""
    ref = copy.deepcopy(model)
    state = mm.make_state()
    pos = 0
    for t in steps:
        ids = torch.randint(0, 64, (1, t))
        p = positions(mode, pos, t)
        with torch.no_grad():
            r = ref(ids, p).numpy()
            for b in ref.buffers():
                b.copy_(b.half().float())
        feed = {"ids": ids.numpy().astype(np.int32),
                "p": p.numpy().astype(np.float32 if mode == "slice" else np.int32)}
        out = list(mm.predict(feed, state=state).values())[0]
        assert out.shape == r.shape
        assert rel(out, r) < TOL[precision], (mode, pos, t, rel(out, r))
        pos += t
    assert pos <= 16


@pytest.mark.parametrize("dialect", ["training", "core"])
@pytest.mark.parametrize("mode", ["index_copy_", "aten.index_copy_", "slice"])
def test_kv_cache_states(mode, dialect):
    model, eps = kv_exported(mode)
    ep = eps[dialect]
    mutated = set(ep.graph_signature.buffers_to_mutate.values())
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    if dialect == "training":
        # in-place ops on the buffers (or on views of them) stay in the graph
        assert not mutated
        assert any(t.endswith(("index_copy_.default", "copy_.default")) for t in targets)
    else:
        assert mutated == {"layers.0.k_cache", "layers.0.v_cache"}
    mm = convert(ep)
    text = mil_text(mm)
    # two fp16 states (Core ML's only state dtype), each written once per prediction
    assert len(re.findall(r"\(1, 2, 16, 8, fp16\)\(State\)", text)) == 2
    assert text.count("coreml_update_state(") == 2
    run_steps(mm, model, mode, FP32)


@pytest.mark.parametrize("dialect", ["training", "core"])
def test_kv_cache_fp16(dialect):
    model, eps = kv_exported("slice")
    mm = convert(eps[dialect], FP16)
    # fp32 buffers are fp16 states read through a cast to fp32 (as coremltools does); under
    # FLOAT16 the casts fold away and read_state feeds fp16 compute directly
    cast_of_read = r"= cast\(x=%read_state_\d+, dtype=\"fp32\""
    assert not re.search(cast_of_read, mil_text(mm))
    assert len(re.findall(cast_of_read, mil_text(convert(eps[dialect], FP32)))) == 2
    run_steps(mm, model, "slice", FP16)


def test_kv_cache_derived_sizes():
    # slice mode: start = E - T and the slices of the cache keep torch's sizes (T, E), no fresh symbol
    _, eps = kv_exported("slice")
    text = mil_text(convert(eps["training"]))
    assert not re.search(r"\bis\d+\b", text)
    assert text.count("slice_update(") == 2


def test_kv_cache_pt2(tmp_path):
    model, eps = kv_exported("index_copy_")
    path = str(tmp_path / "kv.pt2")
    torch.export.save(eps["core"], path)
    mm = milkit.convert(path, compute_precision=FP32, minimum_deployment_target=milkit.target.iOS18)
    run_steps(mm, model, "index_copy_", FP32, steps=(2, 1, 3))


class NoGradCache(nn.Module):
    """A cache written under torch.no_grad(): TRAINING puts the write inside the subgraph of a
    wrap_with_set_grad_enabled higher-order op, which takes the buffer as an operand."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 8, 4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x, pos):
        with torch.no_grad():
            self.cache.index_copy_(1, pos, self.lin(x))
        return self.cache.sum(1, keepdim=True) + x


def no_grad_program(dialect, rename):
    """The NoGradCache program as milkit imports it; `rename` gives the subgraph's own name for
    the buffer (torch reuses the outer names, other producers need not)."""
    from milkit import _core
    from milkit.frontends import torch as mtorch

    torch.manual_seed(2)
    model = NoGradCache().eval()
    t = torch.export.Dim("T", max=8)
    ep = torch.export.export(model, (torch.randn(1, 2, 4), torch.arange(2)), dynamic_shapes={"x": {1: t}, "pos": {0: t}})
    if dialect == "core":
        ep = ep.run_decompositions()
    j = json.loads(mtorch._serialize(ep))
    hops = [n for n in j["graph_module"]["graph"]["nodes"] if "wrap_with_set_grad_enabled" in n["target"]]
    assert len(hops) == (1 if dialect == "training" else 0)
    if rename:
        arg = hops[0]["inputs"][1]["arg"]["as_graph"]
        arg["graph"] = json.loads(json.dumps(arg["graph"]).replace('"b_cache"', '"inner_cache"'))
    weights = {k: mtorch._tensor_entry(k, v) for k, v in ep.state_dict.items()}
    prog, info = _core.import_torch_export(json.dumps(j).encode(), weights, {}, milkit.target.iOS18.value, {}, "<test>")
    assert info["state_names"] == ["cache"]
    return model, prog


@pytest.mark.parametrize("dialect,rename", [("training", False), ("training", True), ("core", False)])
def test_no_grad_region_writes_state(dialect, rename):
    model, prog = no_grad_program(dialect, rename)
    mm = milkit.convert(prog, compute_precision=FP32, minimum_deployment_target=milkit.target.iOS18)
    ref = copy.deepcopy(model)
    state = mm.make_state()
    pos = 0
    for t in (2, 1, 3):
        x = torch.randn(1, t, 4)
        p = torch.arange(pos, pos + t)
        with torch.no_grad():
            r = ref(x, p).numpy()
            ref.cache.copy_(ref.cache.half().float())
        out = list(mm.predict({"x": x.numpy(), "pos": p.numpy().astype(np.int32)}, state=state).values())[0]
        assert rel(out, r) < TOL[FP32], (t, rel(out, r))
        pos += t


def test_kv_cache_needs_ios18():
    _, eps = kv_exported("index_copy_")
    with pytest.raises(ValueError, match="iOS18"):
        milkit.convert(eps["training"], minimum_deployment_target=milkit.target.iOS17)
