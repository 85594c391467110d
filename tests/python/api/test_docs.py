"""The documentation's examples run: every ```python block of each guide, in order, in one namespace
per page (blocks meant as excerpts are marked ```text)."""

import glob
import os
import re
import warnings

import pytest

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs")
PAGES = sorted(glob.glob(os.path.join(DOCS, "guides", "*.md")) + [os.path.join(DOCS, "index.md")])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_pages_are_found():
    names = {os.path.basename(p) for p in PAGES}
    assert {"building.md", "symbolic_shapes.md", "converting.md", "editing_packages.md", "writing_passes.md",
            "running_on_linux.md", "jupyter.md", "differences.md", "index.md"} <= names
    assert os.path.getsize(os.path.join(DOCS, "_static", "display.png")) > 10000


@pytest.mark.parametrize("page", PAGES, ids=[os.path.basename(p) for p in PAGES])
def test_guide_examples_run(page, tmp_path, monkeypatch, capsys):
    text = open(page, encoding="utf-8").read()
    blocks = BLOCK.findall(text)
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, code in enumerate(blocks):
            try:
                exec(compile(code, f"{os.path.basename(page)}[block {i}]", "exec"), ns)
            except Exception as e:  # name the block in the failure
                raise AssertionError(f"{os.path.basename(page)} block {i} failed: {e!r}\n{code}") from e
