"""Jupyter display (`_repr_html_`), Graphviz drawing (`to_dot`, `milkit.show`), and one render of the
display in a real headless browser (Chromium)."""

import html
import os
import shutil
import struct
import subprocess
import time
import warnings
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser

import milkit
import numpy as np
import pytest
from milkit import Builder as mb
from milkit import display, get_new_symbol, graph

HOSTILE = "<script>alert(\"x&y\")</script>'"
VOID = {"br", "hr", "img", "input", "meta", "link", "col", "wbr", "area", "base", "embed", "source", "track"}


class _Balance(HTMLParser):
    """Checks that every tag closes in order and collects the text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.text, self.tags, self.errors = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _check_markup(markup):
    """Well-formed (strict XML parse and balanced HTML tags), no script element, no raw hostile
    text; returns (the parser, the text content)."""
    root = ET.fromstring(markup)  # raises on any unbalanced tag or bad entity
    assert root.tag == "div"
    p = _Balance()
    p.feed(markup)
    p.close()
    assert not p.errors, p.errors
    assert not p.stack, f"unclosed: {p.stack}"
    assert "script" not in p.tags
    assert HOSTILE not in markup
    return p, "".join(p.text)


def _small_prog(name_prefix="enc/"):
    S = get_new_symbol("S")
    S.set_range(1, 512)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, S, 8))], opset_version=milkit.target.iOS17)
    def prog(x):
        y = mb.linear(x=x, weight=np.ones((8, 8), np.float32), name=f"{name_prefix}l0/q")
        z = mb.mul(x=y, y=2.0, name=f"{name_prefix}l0/scale")
        w = mb.relu(x=z, name=f"{name_prefix}l1/act")
        c = mb.concat(values=[w, x], axis=1, name="cat")
        return mb.add(x=c, y=np.float16(1.0).astype(np.float32), name="out")

    return prog


def _hostile_prog():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=milkit.target.iOS17)
    def prog(x):
        y = mb.relu(x=x, name=HOSTILE)
        return mb.mul(x=y, y=np.float32(3.0), name="a&b \"c\" <d>")

    prog._set_attribute(HOSTILE, HOSTILE + " & more")
    return prog


# ---- _repr_html_ -------------------------------------------------------------------------------
_DISPLAYED = {
    "program": lambda prog, fn: prog,
    "function": lambda prog, fn: fn,
    "block": lambda prog, fn: fn.block,
    "operation": lambda prog, fn: fn.find_ops(op_type="relu")[0],
    "var": lambda prog, fn: fn.find_ops(op_type="relu")[0].outputs[0],
    "input": lambda prog, fn: fn.inputs["x"],
    "other_operation": lambda prog, fn: fn.find_ops(op_type="mul")[0],
}


@pytest.mark.parametrize("what", list(_DISPLAYED))
def test_every_display_is_well_formed_and_escaped(what):
    prog = _hostile_prog()
    fn = prog.functions["main"]
    obj = _DISPLAYED[what](prog, fn)
    markup = obj._repr_html_()
    assert isinstance(markup, str)
    _, text = _check_markup(markup)
    if obj is not fn.inputs["x"]:
        # the hostile name reaches the reader as text, not as markup
        assert HOSTILE in text, type(obj).__name__
    assert "&lt;script&gt;" in markup


def test_program_display_escapes_metadata():
    prog = _hostile_prog()
    _, text = _check_markup(prog._repr_html_())
    assert HOSTILE + " & more" in text  # metadata value
    assert 'a&b "c" <d>' in text


def test_program_summary_shows_io_symbols_histogram_weights():
    prog = _small_prog()
    p, text = _check_markup(prog._repr_html_())
    assert "details" in p.tags and "summary" in p.tags and "pre" in p.tags
    assert "(2, S, 8) fp32" in text  # input
    assert "(2, 2*S, 8) fp32" in text  # output, symbolic expression readable
    assert "S \u2208 [1, 512]" in text
    assert "iOS17" in text
    assert "5 ops, 6 consts (301 B)" in text
    # weights: 8x8 + 8 fp32 (linear), two fp32 scalars; concat's axis and interleave
    assert "bool: 1 (1 B), fp32: 4 (296 B), int32: 1 (4 B)" in text
    for t in ("linear", "mul", "relu", "concat", "add"):
        assert t in text
    assert str(prog) in text  # the whole MIL text, collapsed


def test_unbounded_symbol_and_state_display():
    T = get_new_symbol("T")

    @mb.program(input_specs=[mb.TensorSpec(shape=(T, 4), dtype=milkit.types.fp16),
                             mb.StateTensorSpec(shape=(2, 4), dtype=milkit.types.fp16)],
                opset_version=milkit.target.iOS18)
    def prog(x, st):
        return mb.read_state(input=st), mb.relu(x=x)

    _, text = _check_markup(prog._repr_html_())
    assert "T \u2208 [1, \u221e)" in text
    assert "state (2, 4) fp16" in text
    assert "weights: none" in text


def test_multifunction_program_marks_the_default():
    @mb.function(input_specs=[mb.TensorSpec(shape=(2,))], opset_version=milkit.target.iOS18)
    def f(x):
        return mb.relu(x=x)

    @mb.function(input_specs=[mb.TensorSpec(shape=(3,))], opset_version=milkit.target.iOS18)
    def g(x):
        return mb.sigmoid(x=x)

    prog = milkit.Program()
    prog.add_function("main", f)
    prog.add_function("other", g)
    prog.default_function_name = "other"
    _, text = _check_markup(prog._repr_html_())
    assert "2 functions" in text
    assert text.count("default") == 1
    assert text.index("other") < text.index("default")


def test_operation_and_var_display():
    prog = _small_prog()
    fn = prog.functions["main"]
    mul = fn.find_ops(op_type="mul")[0]
    _, text = _check_markup(mul._repr_html_())
    assert "enc/l0/scale" in text and "const 2.0" in text and "1 consumers" in text
    assert "built at" in text and "test_display.py" in text
    _, text = _check_markup(mul.outputs[0]._repr_html_())
    assert "mul 'enc/l0/scale'" in text and "enc/l1/act" in text and "S \u2208 [1, 512]" in text
    _, text = _check_markup(fn.inputs["x"]._repr_html_())
    assert "a function input" in text


def test_big_program_display_is_cut_and_cheap():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=milkit.target.iOS17)
    def prog(x):
        for i in range(10000):
            x = mb.add(x=x, y=np.float32(1.0)) if i % 2 else mb.mul(x=x, y=np.float32(0.5))
        return x

    markup = prog._repr_html_()
    assert len(markup) < display.MAX_TEXT_CHARS + 20000
    _, text = _check_markup(markup)
    assert "10000 ops, 10000 consts" in text
    assert "more lines not shown" in text


def test_mlmodel_display(tmp_path):
    prog = _small_prog()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = milkit.convert(prog, minimum_deployment_target=milkit.target.iOS17,
                               compute_precision=milkit.precision.FLOAT32)
    _, text = _check_markup(model._repr_html_())
    assert model.package_path in text and "Program" in text
    weird = tmp_path / "m<&>'.mlpackage"
    model.save(weird)
    loaded = milkit.models.MLModel(weird)
    _, text = _check_markup(loaded._repr_html_())
    assert str(weird) in text and "function" in text and "linear" in text  # read from the package
    os.remove(weird / "Data" / "com.apple.CoreML" / "model.mlmodel")
    _, text = _check_markup(loaded._repr_html_())
    assert "cannot read the package" in text


# ---- to_dot / show -----------------------------------------------------------------------------
def _dot_nodes(dot):
    return [ln for ln in dot.splitlines() if "[label=" in ln]


def test_to_dot_groups_by_scope_and_folds_consts():
    prog = _small_prog()
    dot = prog.to_dot()
    assert dot.startswith("digraph milkit {") and dot.rstrip().endswith("}")
    # enc > l0 and enc > l1 clusters, nested
    lines = dot.splitlines()
    i_enc = next(i for i, ln in enumerate(lines) if ln.strip() == 'label="enc"; style="rounded,dashed"; color="#8a8a8a";')
    i_l0 = next(i for i, ln in enumerate(lines) if 'label="l0"' in ln)
    assert i_enc < i_l0 and lines[i_l0].startswith("    ")  # nested one level deeper
    q = next(ln for ln in lines if 'label="linear\\nq\\n' in ln)  # the leaf name: clusters show the scope
    assert "weight: (8, 8) fp32" in q and "bias: (8,) fp32" in q
    scale = next(ln for ln in lines if 'label="mul\\nscale\\n' in ln)
    assert "y=2.0" in scale
    # 5 ops + input + output, no const nodes
    assert len(_dot_nodes(dot)) == 7
    assert "const" not in dot
    hidden = prog.to_dot(consts="hide")
    assert "weight:" not in hidden and len(_dot_nodes(hidden)) == 7
    shown = prog.to_dot(consts="show")
    assert len(_dot_nodes(shown)) == 7 + 6 and "shape=note" in shown
    flat = prog.to_dot(scope_sep="")
    assert "subgraph" not in flat
    assert "rankdir=LR" in prog.to_dot(rankdir="LR")
    with pytest.raises(ValueError, match="consts"):
        prog.to_dot(consts="maybe")
    with pytest.raises(ValueError, match="no function named"):
        prog.to_dot(function_name="nope")
    assert prog.functions["main"].to_dot() == prog.to_dot()


def test_to_dot_edges_follow_the_dataflow():
    prog = _small_prog()
    dot = prog.to_dot()
    ids = {}
    for ln in _dot_nodes(dot):
        nid, rest = ln.strip().split(" ", 1)
        ids[rest.split("\\n")[1] if "\\n" in rest else rest] = nid
    edges = {tuple(ln.strip().rstrip(";").split(" -> ")) for ln in dot.splitlines() if " -> " in ln}
    assert (ids["q"], ids["scale"]) in edges
    assert (ids["act"], ids["cat"]) in edges
    x = next(nid for ln, nid in ((ln, ln.strip().split(" ")[0]) for ln in _dot_nodes(dot)) if 'label="x\\n' in ln)
    assert (x, ids["cat"]) in edges and (x, ids["q"]) in edges
    assert len(edges) == 7


def test_multifunction_dot_has_a_cluster_per_function():
    @mb.function(input_specs=[mb.TensorSpec(shape=(2,))], opset_version=milkit.target.iOS18)
    def f(x):
        return mb.relu(x=x)

    prog = milkit.Program()
    prog.add_function("main", f)
    prog.add_function("second", f)
    dot = prog.to_dot()
    assert 'label="function main"' in dot and 'label="function second"' in dot
    assert 'label="function second"' not in prog.to_dot(function_name="main")


def _chain(n, scoped):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=milkit.target.iOS17)
    def prog(x):
        for i in range(n):
            name = f"layers.{i // 20}/block{(i // 10) % 2}/op{i}" if scoped else None
            x = mb.add(x=x, y=np.float32(1.0), name=name)
        return x

    return prog


@pytest.mark.parametrize("scoped", [False, True])
def test_ten_thousand_ops_fold_to_a_bounded_graph(scoped):
    prog = _chain(10000, scoped)
    dot = prog.to_dot()
    nodes = _dot_nodes(dot)
    edges = [ln for ln in dot.splitlines() if " -> " in ln]
    assert len(nodes) <= graph.DEFAULT_MAX_NODES + 2  # summary nodes + input + output
    assert len(nodes) >= graph.DEFAULT_MAX_NODES // 2
    assert len(edges) <= len(nodes) + 2
    assert "10000 ops, folded" in dot
    assert all("ops\\n" in ln for ln in nodes if "box3d" in ln)
    if scoped:
        # 500 scopes at the top do not fit: runs of whole top-level scopes
        assert "layers.0 \u2026 layers.2\\n60 ops" in dot
    small = prog.to_dot(max_nodes=30)
    assert len(_dot_nodes(small)) <= 32


def test_fold_keeps_the_deepest_scopes_that_fit():
    prog = _chain(400, scoped=True)  # 20 top scopes x 2 blocks of 10 ops
    dot = prog.to_dot(max_nodes=50)
    nodes = _dot_nodes(dot)
    assert len(nodes) == 40 + 2
    assert 'label="layers.3/block1\\n10 ops\\nadd 10"' in dot
    assert 'label="layers.3"' in dot  # the parent scope is a cluster
    dot = prog.to_dot(max_nodes=25)
    assert len(_dot_nodes(dot)) == 20 + 2 and 'label="layers.3\\n20 ops\\nadd 20"' in dot


def test_dot_escapes_names_and_renders():
    prog = _hostile_prog()
    dot = prog.to_dot()
    assert '\\"x&y\\"' in dot  # quotes escaped in DOT
    svg = milkit.show(prog)
    assert isinstance(svg, graph.SVG)
    root = ET.fromstring(svg.data.split("?>", 1)[-1] if svg.data.startswith("<?xml") else svg.data)
    assert root.tag.endswith("svg")
    assert "<script" not in svg.data  # Graphviz escapes label text in SVG
    assert html.escape("<script>", quote=False) in svg.data
    assert svg._repr_svg_() == svg.data


def test_show_returns_svg_fast_for_ten_thousand_ops(tmp_path):
    prog = _chain(10000, scoped=False)
    t = time.perf_counter()
    svg = milkit.show(prog)
    elapsed = time.perf_counter() - t
    assert "<svg" in svg.data and svg.data.count("<g id=\"node") <= graph.DEFAULT_MAX_NODES + 2
    svg.save(tmp_path / "g.svg")
    assert (tmp_path / "g.svg").read_text().startswith(svg.data[:50])
    print(f"show(10,000 ops): {elapsed:.2f} s")


# ---- a real browser ----------------------------------------------------------------------------
def _png_pixels(path):
    """(width, height, rows of RGB(A) tuples) of an 8-bit RGB/RGBA PNG, decoded with zlib."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, h, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def screenshot(page_html, out_png, size=(1000, 760)):
    """Renders ``page_html`` in headless Chromium to ``out_png``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is not installed (Debian package chromium, in the Makefile's APT_PACKAGES)"
    page = os.path.splitext(out_png)[0] + ".html"
    with open(page, "w", encoding="utf-8") as f:
        f.write(page_html)
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--screenshot={out_png}", f"--window-size={size[0]},{size[1]}", "file://" + os.path.abspath(page)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HOME": os.path.dirname(os.path.abspath(out_png))})
    assert os.path.exists(out_png), r.stderr[-2000:]


def test_display_renders_in_headless_chromium(tmp_path):
    prog = _small_prog()
    out = str(tmp_path / "display.png")
    page = display.html_page(prog, graph=True)
    assert page.startswith("<!DOCTYPE html>")
    assert ET.fromstring(page[len("<!DOCTYPE html>"):]).tag == "html"  # well-formed, graph included
    screenshot(page, out)
    w, h, bpp, rows = _png_pixels(out)
    assert (w, h) == (1000, 760)
    colors = set()
    dark = 0
    for row in rows[::4]:
        for x in range(0, w * bpp, bpp * 4):
            px = row[x:x + 3]
            colors.add(px)
            dark += sum(px) < 200
    assert len(colors) > 20, "the page rendered as (almost) one color"
    assert dark > 200, "no text drawn"
    # the histogram bars (#4a90d9) are drawn
    assert any(abs(p[0] - 0x4A) < 8 and abs(p[1] - 0x90) < 8 and abs(p[2] - 0xD9) < 8 for p in colors)


def test_import_milkit_does_not_load_display_or_graphviz():
    import sys

    code = "import sys, milkit; print([m for m in ('graphviz', 'milkit.display', 'html') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(milkit.__file__))})
    assert out.stdout.strip() == "[]"


def test_show_without_the_graphviz_package_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError
    with pytest.raises(ImportError, match="pip install graphviz"):
        milkit.show(_small_prog())
    assert "digraph" in _small_prog().to_dot()  # DOT needs nothing
