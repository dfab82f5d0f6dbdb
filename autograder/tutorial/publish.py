"""The tutorial published: built as pytorch.org builds it, and as a pull request to pytorch/tutorials.

`build_site` (`python -m autograder tutorial --out DIR --html`) builds the script with Sphinx,
sphinx-gallery and PyTorch's theme, warnings as errors, in a one-tutorial copy of pytorch/tutorials'
set-up. `write_pr` (`--pr DIR`) writes the files a pull request to pytorch/tutorials holds, at their
paths there: the script in beginner_source/, its thumbnail (the tutorial's first figure, made square)
in _static/img/thumbnails/cropped/, and in PR_ENTRIES the card for index.rst and the toctree entry,
to paste. docs/tutorial.md says how to open the pull request.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.tutorial.make import AUTHOR, FILENAME, TITLE, TutorialError, render, write

CONF = '''\
"""A one-tutorial copy of pytorch/tutorials' Sphinx set-up (conf.py there)."""
import importlib.util
import os

project = "PyTorch Tutorials (one tutorial)"
author = {author!r}
extensions = ["sphinx.ext.mathjax", "sphinx_gallery.gen_gallery", "sphinx_design"]
sphinx_gallery_conf = {
    "examples_dirs": ["beginner_source"],
    "gallery_dirs": ["beginner"],
    "filename_pattern": "tutorial.py",
    "backreferences_dir": None,
    "download_all_examples": False,
    "first_notebook_cell": "%matplotlib inline",
    "abort_on_example_error": True,
}
exclude_patterns = ["_build", "beginner_source"]
if importlib.util.find_spec("pytorch_sphinx_theme2"):       # as pytorch/tutorials sets it up
    import pytorch_sphinx_theme2
    html_theme = "pytorch_sphinx_theme2"
    html_theme_path = [pytorch_sphinx_theme2.get_html_theme_path()]
    templates_path = [os.path.join(os.path.dirname(pytorch_sphinx_theme2.__file__), "templates")]
    html_theme_options = {"navigation_with_keys": False, "show_lf_header": False, "show_lf_footer": False,
                          "pytorch_project": "tutorials", "logo": {"text": "Tutorials"}}
else:                                                        # Sphinx's default theme
    html_theme = "alabaster"
'''

INDEX = """\
Tutorials
=========

.. toctree::
   :maxdepth: 1

   beginner/{stem}
"""

README = """\
Beginner tutorials
==================
"""


def theme() -> str:
    """The HTML theme the site is built with: PyTorch's when installed, else Sphinx's default."""
    import importlib.util
    return "pytorch_sphinx_theme2" if importlib.util.find_spec("pytorch_sphinx_theme2") else "alabaster"


def build_site(root: Path, script: Path | None = None) -> Path:
    """A Sphinx project in `root` holding the tutorial under beginner_source/ (the script `script`,
    or the one built from source/ now), built to HTML with sphinx-gallery, which runs the script and
    writes the .py and .ipynb downloads; returns the HTML page of the tutorial. Files already in
    `root` are overwritten, none is deleted."""
    source = root / "beginner_source"
    source.mkdir(parents=True, exist_ok=True)
    if script is None:
        script = write(source)
    else:
        shutil.copy(script, source / script.name)
    (source / "README.txt").write_text(README)
    (root / "conf.py").write_text(CONF.replace("{author!r}", repr(AUTHOR[0])))
    (root / "index.rst").write_text(INDEX.format(stem=Path(script.name).stem))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    html = root / "_build" / "html"
    # -W: a warning (a reStructuredText mistake in a tagged cell, a missing image) fails the build
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", str(root),
                          str(html)], env=env, cwd=root, capture_output=True, text=True)
    if run.returncode:
        raise TutorialError(f"the Sphinx build failed:\n{run.stderr[-6000:]}")
    return html / "beginner" / (Path(script.name).stem + ".html")


# ------------------------------------------------------------------------------------------------
# A pull request to pytorch/tutorials

STEM = Path(FILENAME).stem
THUMBNAIL = f"_static/img/thumbnails/cropped/{STEM}.png"
"""Where pytorch/tutorials keeps a card's image; its newest are named after their tutorial
(visualizing_gradients_tutorial.png). CONTRIBUTING.md asks for a square, high-resolution one."""
THUMBNAIL_PIXELS = 800
PR_ENTRIES = "index_entries.txt"

CARD_DESCRIPTION = ("What nn.Linear, backward() and optimizer.step() compute, each formula checked "
                    "against PyTorch.")
CARD_TAGS = "Getting-Started"
"""An existing tag of index.rst (a new one needs a maintainer), hyphenated, no spaces."""

ENTRIES = """\
pytorch/tutorials: what to add next to the files of this folder.

1. index.rst, among the cards ("Add tutorial cards below this line"), after the card
   "Visualizing Gradients in PyTorch" (the Getting-Started cards):

.. customcarditem::
   :header: {title}
   :card_description: {description}
   :image: {image}
   :link: beginner/{stem}.html
   :tags: {tags}

2. The toctree with the caption "Learning PyTorch", after intermediate/visualizing_gradients_tutorial.
   It is in intro.rst; in a checkout without intro.rst it is at the end of index.rst:

   beginner/{stem}
"""

FIRST_FIGURE = """
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

class Drawn(Exception):
    pass

def show(*args, **kwargs):
    # the first figure as a card's image: square, its curves only (no legend, labels or axes)
    figure = plt.gcf()
    figure.set_size_inches(4, 4)
    for ax in figure.axes:
        if ax.get_legend():
            ax.get_legend().remove()
        ax.set_axis_off()
        ax.autoscale()                    # the data's own limits, not the page's
        for line in ax.get_lines():
            line.set_linewidth(2 * line.get_linewidth())
            line.set_markersize(1.5 * line.get_markersize())
    figure.tight_layout(pad=0.3)
    figure.savefig(sys.argv[2], dpi=int(sys.argv[3]) // 4)
    raise Drawn

plt.show = show
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
except Drawn:
    sys.exit(0)
sys.exit("the tutorial shows no figure")
"""


def thumbnail(script: Path, out: Path) -> Path:
    """The tutorial's first figure (sphinx-gallery's choice for a thumbnail too), square, as `out`:
    the script runs up to its first plt.show()."""
    out.parent.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([sys.executable, "-c", FIRST_FIGURE, str(script), str(out), str(THUMBNAIL_PIXELS)],
                         cwd=script.parent, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MPLBACKEND": "Agg"})
    if run.returncode:
        raise TutorialError(f"the thumbnail could not be drawn:\n{run.stderr[-3000:]}")
    return out


def write_pr(root: Path) -> list[Path]:
    """The files of a pull request to pytorch/tutorials, under `root` at their paths there."""
    source = root / "beginner_source"
    source.mkdir(parents=True, exist_ok=True)
    script = source / FILENAME
    script.write_text(render())
    image = thumbnail(script, root / THUMBNAIL)
    entries = root / PR_ENTRIES
    entries.write_text(ENTRIES.format(title=TITLE, description=CARD_DESCRIPTION, image=THUMBNAIL, stem=STEM,
                                      tags=CARD_TAGS))
    return [script, image, entries]


def main(out: Path | None, html: bool, pr: Path | None = None) -> int:
    if out:
        path = write(out)
        print(f"tutorial -> {path}")
        if html:
            page = build_site(out / "site", path)
            print(f"html ({theme()}) -> {page}")
    if pr:
        for path in write_pr(pr):
            print(f"pull request -> {path}")
    return 0
