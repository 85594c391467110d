"""LLM decoding with the KV cache as states: a small Llama-style decoder (benchmarks/llm_model.py:
RMSNorm, rotary, GQA, SwiGLU, caches written with index_copy_ or slice assignment) exported as a
prefill program (8 tokens) and a decode program (1 token), converted for iOS18 and run as a
generation loop: prefill a prompt, then greedy decoding with one state carried across both
programs.

The reference is the fp32 eager model whose cache buffers are rounded to fp16 after each step
(Core ML keeps states in fp16). Both sides are fed the tokens milkit picks; logits must agree
closely at every step, and milkit's token must be the reference's argmax wherever the reference's
top-2 gap is clearly larger than the logit error allowed.
"""

import copy
import os
import re
import sys

import milkit
import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "benchmarks"))
import llm_model as L  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")

FP32 = milkit.precision.FLOAT32
FP16 = milkit.precision.FLOAT16
TOL = {FP32: 1e-4, FP16: 1e-2}
CFG = L.Config(layers=2, hidden=64, ffn=128, heads=4, kv_heads=2, vocab=128, max_len=32)
PROMPT = 8
NEW_TOKENS = 12


def convert(src, precision):
    return milkit.convert(src, compute_precision=precision, minimum_deployment_target=milkit.target.iOS18)


_models = {}


def model_and_programs(mode):
    if mode not in _models:
        model = L.build_model(CFG, mode=mode, seed=3)
        _models[mode] = (model, L.export_programs(model, PROMPT))
    return _models[mode]


def feed(mode, ids, start):
    p = L.positions(mode, start, ids.shape[1]).numpy()
    return {"ids": ids.numpy().astype(np.int32), "p": p.astype(np.float32 if mode == "slice" else np.int32)}


def logits(mm, mode, ids, start, state):
    return np.asarray(list(mm.predict(feed(mode, ids, start), state=state).values())[0], dtype=np.float32)


class EagerRef:
    """The eager model stepped like the converted one, its caches rounded to fp16 after each step."""

    def __init__(self, model, mode):
        self.model, self.mode = copy.deepcopy(model), mode

    def __call__(self, ids, start):
        with torch.no_grad():
            out = self.model(ids, L.positions(self.mode, start, ids.shape[1])).numpy()
            for b in self.model.buffers():
                b.copy_(b.half().float())
        return out


def generate(prefill, decode, mode, ref, tol, prompt_seed=0):
    """Prefill + greedy decoding with milkit's tokens fed to both sides. Returns (tokens, number of
    steps whose token was checked against the reference's argmax)."""
    ids = torch.randint(0, CFG.vocab, (1, PROMPT), generator=torch.Generator().manual_seed(prompt_seed))
    state = prefill.make_state()
    out, r = logits(prefill, mode, ids, 0, state), ref(ids, 0)
    tokens, checked, pos = [], 0, PROMPT
    for step in range(NEW_TOKENS + 1):
        scale = np.abs(r).max()
        err = np.abs(out - r).max() / scale
        assert err < tol, (step, err)
        last, rlast = out[0, -1], r[0, -1]
        tok = int(last.argmax())
        top2 = np.sort(rlast)[-2:]
        if top2[1] - top2[0] > 4 * tol * scale:  # a clear winner: the tokens must agree
            assert tok == int(rlast.argmax()), (step, tok, int(rlast.argmax()))
            checked += 1
        tokens.append(tok)
        if step == NEW_TOKENS:
            break
        nxt = torch.tensor([[tok]])
        out, r = logits(decode, mode, nxt, pos, state), ref(nxt, pos)
        pos += 1
    return tokens, checked


@pytest.mark.parametrize("precision", [FP32, FP16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("mode", ["index_copy", "slice"])
def test_greedy_decode_matches_eager(mode, precision):
    model, eps = model_and_programs(mode)
    prefill, decode = convert(eps["prefill"], precision), convert(eps["decode"], precision)
    text = decode.get_program().functions["main"].to_str()
    # one fp16 state per cache buffer, each written once per prediction
    assert len(re.findall(r"\(1, 2, 32, 16, fp16\)\(State\)", text)) == 2 * CFG.layers
    assert text.count("coreml_update_state(") == 2 * CFG.layers
    tokens, checked = generate(prefill, decode, mode, EagerRef(model, mode), TOL[precision])
    assert len(tokens) == NEW_TOKENS + 1
    assert checked >= NEW_TOKENS // 2, checked  # most steps have a clear winner


def test_lazily_written_pt2_decodes(tmp_path):
    # the archive written weight by weight from a program exported with fake weights converts
    # from its path and decodes like the eager model with the same weights
    paths = L.export_pt2(CFG, str(tmp_path), dtype=torch.float32, prefill=PROMPT, seed=3, lazy=True)
    model = L.build_model(CFG, seed=3)
    prefill, decode = convert(paths["prefill"], FP16), convert(paths["decode"], FP16)
    tokens, checked = generate(prefill, decode, "index_copy", EagerRef(model, "index_copy"), TOL[FP16], 1)
    assert checked >= NEW_TOKENS // 2
    # the same bytes torch.export.save writes from the real weights
    loaded = torch.export.load(paths["decode"]).state_dict
    for name, w in model.state_dict().items():
        assert torch.equal(loaded[name], w), name


def palettize(mm):
    c = milkit.optimize.coreml
    cfg = c.OpPalettizerConfig(mode="kmeans", nbits=4, granularity="per_grouped_channel", group_size=16)
    return c.palettize_weights(mm, c.OptimizationConfig(global_config=cfg))


def test_palettized_decode():
    # 4-bit per grouped channel: the packed model decodes like its own decompressed weights
    _, eps = model_and_programs("index_copy")
    packed = {k: palettize(convert(ep, FP16)) for k, ep in eps.items()}
    text = packed["decode"].get_program().functions["main"].to_str()
    assert "constexpr_lut_to_dense(" in text
    dense = {k: milkit.optimize.coreml.decompress_weights(m) for k, m in packed.items()}
    assert "constexpr_lut_to_dense(" not in dense["decode"].get_program().functions["main"].to_str()

    class DenseRef:
        state = dense["prefill"].make_state()

        def __call__(self, ids, start):
            mm = dense["prefill" if ids.shape[1] > 1 else "decode"]
            return logits(mm, "index_copy", ids, start, self.state)

    tokens, checked = generate(packed["prefill"], packed["decode"], "index_copy", DenseRef(), TOL[FP16], 2)
    assert checked >= NEW_TOKENS // 2


def test_multifunction_prefill_and_decode(tmp_path):
    # prefill and decode saved as one package (milkit.utils.save_multifunction): the weights they
    # share are stored once, each function loads by name, and the state the prefill function
    # makes carries the cache into the decode function
    model, eps = model_and_programs("index_copy")
    paths = {}
    for name in ("prefill", "decode"):
        paths[name] = str(tmp_path / f"{name}.mlpackage")
        convert(eps[name], FP16).save(paths[name])
    desc = milkit.utils.MultiFunctionDescriptor()
    desc.add_function(paths["prefill"], "main", "prefill")
    desc.add_function(paths["decode"], "main", "decode")
    desc.default_function_name = "decode"
    out = str(tmp_path / "llm.mlpackage")
    milkit.utils.save_multifunction(desc, out)

    def weight_bytes(p):
        return os.path.getsize(os.path.join(p, "Data", "com.apple.CoreML", "weights", "weight.bin"))

    # one copy of the weights (the two sources hold the same ones)
    assert weight_bytes(out) <= weight_bytes(paths["prefill"]) + 4096
    prefill = milkit.models.MLModel(out, function_name="prefill")
    decode = milkit.models.MLModel(out, function_name="decode")

    tokens, checked = generate(prefill, decode, "index_copy", EagerRef(model, "index_copy"), TOL[FP16])
    assert checked >= NEW_TOKENS // 2
    # the same tokens as the two separate packages
    alone = generate(milkit.models.MLModel(paths["prefill"]), milkit.models.MLModel(paths["decode"]),
                     "index_copy", EagerRef(model, "index_copy"), TOL[FP16])[0]
    assert tokens == alone
