"""Whole programs (the benchmark workloads) built with coremltools and milkit must match op for op."""

import numpy as np
from support.parity import check

HEAD_DIM = 16


def _layers(n, H, seed=0):
    rng = np.random.default_rng(seed)

    def f(*s):
        return rng.standard_normal(s, dtype=np.float32) * 0.02

    return [dict(ln1_g=np.ones(H, np.float32), ln1_b=np.zeros(H, np.float32), wq=f(H, H), bq=f(H), wk=f(H, H),
                 bk=f(H), wv=f(H, H), bv=f(H), wo=f(H, H), bo=f(H), ln2_g=np.ones(H, np.float32),
                 ln2_b=np.zeros(H, np.float32), w1=f(4 * H, H), b1=f(4 * H), w2=f(H, 4 * H), b2=f(H))
            for _ in range(n)]


def _transformer(layers, H):
    nh = H // HEAD_DIM
    scale = np.float32(1.0 / np.sqrt(HEAD_DIM))

    def build(mb, x):
        for L in layers:
            h = mb.layer_norm(x=x, axes=[-1], gamma=L["ln1_g"], beta=L["ln1_b"], epsilon=1e-5)
            q = mb.linear(x=h, weight=L["wq"], bias=L["bq"])
            k = mb.linear(x=h, weight=L["wk"], bias=L["bk"])
            v = mb.linear(x=h, weight=L["wv"], bias=L["bv"])
            q = mb.transpose(x=mb.reshape(x=q, shape=[1, -1, nh, HEAD_DIM]), perm=[0, 2, 1, 3])
            k = mb.transpose(x=mb.reshape(x=k, shape=[1, -1, nh, HEAD_DIM]), perm=[0, 2, 1, 3])
            v = mb.transpose(x=mb.reshape(x=v, shape=[1, -1, nh, HEAD_DIM]), perm=[0, 2, 1, 3])
            s = mb.softmax(x=mb.mul(x=mb.matmul(x=q, y=k, transpose_y=True), y=scale), axis=-1)
            a = mb.reshape(x=mb.transpose(x=mb.matmul(x=s, y=v), perm=[0, 2, 1, 3]), shape=[1, -1, H])
            x = mb.add(x=x, y=mb.linear(x=a, weight=L["wo"], bias=L["bo"]))
            h = mb.layer_norm(x=x, axes=[-1], gamma=L["ln2_g"], beta=L["ln2_b"], epsilon=1e-5)
            m = mb.gelu(x=mb.linear(x=h, weight=L["w1"], bias=L["b1"]), mode="EXACT")
            x = mb.add(x=x, y=mb.linear(x=m, weight=L["w2"], bias=L["b2"]))
        return x

    return build


def test_transformer_symbolic_matches_coremltools():
    H = 64
    res = check(_transformer(_layers(2, H), H), [((1, "S", H), "fp32")], ["iOS15", "iOS17", "iOS18"])
    out = res[0].mk_prog.functions["main"].outputs[0]
    assert str(out.shape[1]) == res[0].ct_prog.functions["main"].inputs["x"].shape[1].name


def test_transformer_concrete_matches_coremltools():
    H = 32
    check(_transformer(_layers(1, H, seed=1), H), [((1, 7, H), "fp32")], ["iOS16", "iOS17"])


def test_chain_matches_coremltools():
    consts = [np.float32(c) for c in np.random.default_rng(0).random(50) * 0.5 + 0.25]

    def build(mb, x):
        for c in consts:
            x = mb.add(x=x, y=c)
        return x

    check(build, [(("S", 64), "fp32")], ["iOS17"])
