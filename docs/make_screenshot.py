"""Makes docs/_static/display.png: a small encoder's notebook display and graph, rendered by
headless Chromium (the same rendering tests/python/tools/test_display.py checks).

    PYTHONPATH=python python3 docs/make_screenshot.py
"""

import os
import shutil
import subprocess
import tempfile

import milkit
import numpy as np
from milkit import Builder as mb
from milkit import display, get_new_symbol


def encoder(layers: int = 2, hidden: int = 32) -> milkit.Program:
    """A tiny transformer-style encoder whose op names carry scopes (encoder/layer_0/attn/...)."""
    S = get_new_symbol("S")
    S.set_range(1, 512)
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, hidden))], opset_version=milkit.target.iOS17)
    def prog(x):
        for i in range(layers):
            p = f"encoder/layer_{i}"
            q = mb.linear(x=x, weight=w(hidden, hidden), name=f"{p}/attn/q_proj")
            k = mb.linear(x=x, weight=w(hidden, hidden), name=f"{p}/attn/k_proj")
            v = mb.linear(x=x, weight=w(hidden, hidden), name=f"{p}/attn/v_proj")
            s = mb.matmul(x=q, y=k, transpose_y=True, name=f"{p}/attn/scores")
            a = mb.softmax(x=mb.mul(x=s, y=np.float32(hidden ** -0.5), name=f"{p}/attn/scale"), axis=-1,
                           name=f"{p}/attn/softmax")
            o = mb.matmul(x=a, y=v, name=f"{p}/attn/context")
            x = mb.add(x=x, y=o, name=f"{p}/residual")
            x = mb.layer_norm(x=x, axes=[-1], gamma=np.ones(hidden, np.float32), beta=np.zeros(hidden, np.float32),
                              name=f"{p}/norm")
        return mb.reduce_mean(x=x, axes=[1], name="pooled")

    return prog


def main() -> None:
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_static", "display.png")
    page = display.html_page(encoder(), graph=True, title="milkit display")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "page.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--no-first-run", f"--screenshot={out}", "--window-size=1100,1000", "file://" + path],
                       check=True, capture_output=True, env={**os.environ, "HOME": tmp})
    print("wrote", out)


if __name__ == "__main__":
    main()
