"""Sphinx configuration of milkit's documentation (``make docs``; warnings are errors)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "_ext"))

project = "milkit"
author = "the milkit authors"
copyright = "the milkit authors"  # noqa: A001

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
    "torch_ops",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "make_screenshot.py", "guides/_generated"]
templates_path: list = []
html_static_path = ["_static"]
html_theme = "alabaster"
html_theme_options = {"page_width": "1120px", "sidebar_width": "230px"}
html_title = "milkit"

# autodoc: the public API, members in source order, type hints in the description
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

nitpicky = False
