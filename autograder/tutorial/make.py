"""The course as one tutorial in PyTorch's own format: a sphinx-gallery script for pytorch/tutorials.

`python -m autograder tutorial --out DIR` writes DIR/training_loop_math_tutorial.py (`write`); with `--html`
it also builds it as pytorch.org does, and `--pr DIR` writes the files of a pull request to
pytorch/tutorials (autograder/tutorial/publish.py). docs/tutorial.md says how to build it and how to
contribute it.

One source. The tutorial's body is the cells of source/01-06 whose metadata.tags holds "tutorial",
in notebook order: markdown cells become reStructuredText text blocks (autograder/tutorial/to_rst.py), code
cells become code blocks, and answer cells give their reference solution (the cell as
solutions/ shows it: the `### BEGIN/END SOLUTION` lines removed). Notebook N is section N. Text
meant for a learner doing the exercises is left out: an "Exercise" subsection of a markdown cell
(from its heading to the end of the cell) and the "*What you may use*" paragraph.

What this module adds around the cells (the frame): the title block with its "What you will learn"
and "Prerequisites" cards, a setup block, one lead paragraph per section, the checks after
cells (`CHECKS`: each formula compared with PyTorch by `torch.testing.assert_close`, through
`check_close`), the figure of the parameters before and after a step, the conclusion and further
reading. A check names the cell it follows by its id, so a tagged cell that goes missing fails
`tests/tutorial/test_tutorial.py`, as does a section left without a tagged cell.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.instructor.build import _SOLUTION_MARKER
from autograder.course import ASSIGNMENTS
from autograder.tutorial.to_rst import inline, markdown_to_rst

TAG = "tutorial"
FILENAME = "training_loop_math_tutorial.py"
SEPARATOR = "#" * 70

AUTHOR = ("Jane Doe", "janedoe")
"""The tutorial's author line: a name and a GitHub handle. A placeholder: the instructor who opens the
pull request puts their own here (docs/tutorial.md). The script's header and the site's conf.py read it."""


def author_rst() -> str:
    name, handle = AUTHOR
    return f"`{name} <https://github.com/{handle}>`__"


LEFT_OUT = {
    # 1. nn.Linear: the shapes figure and the learner's own matmul / linear_forward
    "5e88aada": "course", "4b593118": "course", "e6594244": "course", "389224f0": "length", "4bea72c8": "length",
    "03f7f6cf": "course", "d35ffd5d": "course", "5669f2ea": "course",
    # 2. nonlinearity: the five-layer collapse, relu(x) + relu(-x), the z = 0 spellings (version-dependent),
    #    the sigmoid derivative by hand
    "151250e7": "length", "f709aea5": "length", "a3cd8834": "length", "7aa17b80": "length",
    "6d1986e6": "length", "c43e02af": "length", "14404977": "length", "a6ac715d": "length", "d76c709f": "length",
    # 3. chain rule: the notation card (the Overview states the notation), the course's functions
    #    (mse_loss_grad, linear_backward, relu_backward, mlp_backward) and the two-layer figure
    "2d6ce979": "length", "91af7499": "course", "9da88135": "course", "75f330ff": "course",
    "2570e9a3": "length", "8279e256": "length", "056b3c80": "length", "90b4748e": "course",
    "10870fbc": "length", "16a47e7d": "length", "09df69a2": "course",
    # 4. grad_fn: the learner's walk (graph_nodes, leaf_tensors), its stand-in recorder and drawing, the
    #    engine order (private node._sequence_nr()) and the tensors-and-nodes figure
    "ffd40d6b": "course", "bb2b9e43": "course", "c3a8a8a7": "course", "85c9c65c": "course", "2a677e5b": "course",
    "ccbb0009": "course", "f560d8f9": "course", "92423621": "course", "305cec66": "private API",
    "86335886": "private API", "be6b9157": "private API", "e9eca771": "length", "f939c320": "length",
    "b651dd7c": "length", "f6dce862": "length", "f2b17e8e": "length", "2914b284": "length",
    # 5. optimizer.step(): the learner's sgd_step and sgd_momentum_update, in-place updates by hand
    "6ad296c5": "course", "096b6c4b": "course", "8c831b65": "course", "1ed0b48b": "course", "8c6710f1": "course",
    "b75487c2": "length", "16c17df7": "length", "cab00005": "course",
    # second pass, for length: collapse_linear, the sigmoid, the Jacobian's size, a second backward(v),
    # backward through a linear layer (section 6.2 states and checks the same formulas), computed leaves,
    # a node reached twice, the seven gradients one by one (section 6.3 checks them over 200 steps)
    "9ccfd3cc": "length", "ae017d48": "length", "35aa60cc": "length", "db4db710": "length",
    "f1d4d570": "length", "42cf5aad": "length", "da3ecffa": "length", "940fe7c8": "length",
    "d991b3f1": "length", "c4854c1d": "length", "3da051b3": "length", "c51aa62f": "length",
    "630e3f0d": "length", "f79d61b1": "length", "2fa6fec9": "length", "bf4b05d2": "length",
    "d4906c44": "length", "182bd7bc": "length", "cc1845a1": "length", "fcb09329": "length",
    "abcc45f8": "length", "5793341e": "length", "4652d04d": "length", "54f067f3": "length",
    "7fd1d406": "length", "da230d59": "length", "b12a5f33": "length", "e4a940d8": "course",
    "4a7a060f": "length", "202b8c27": "length", "182a6366": "length", "47204b28": "length",
    "76320a59": "length", "406e4e81": "length", "65f14bf1": "length", "3c042a59": "length",
}
"""Tagged cells the tutorial leaves to the notebooks, by id, and why: "course" (written for someone doing
the exercises: their own functions, stand-ins, diagnostics), "private API", or "length" (a beginner
tutorial is at most MAX_BYTES; the notebooks keep the rest)."""

MAX_BYTES = 35_000
"""pytorch/tutorials' beginner tutorials are 10-15 KB; this one covers six topics in at most this."""

REWRITES = [
    (r"Check it on two real layers before you write it as a function:", "Check it on two real layers:"),
    (r"\(imported in the setup cell as `jacobian`\)", "(imported in the Setup block as `jacobian`)"),
    (r" You now write those formulas for the pieces of a small network\..*", "\n"),
    (r" \(in which order, section 3 shows at its end\)", ""),
    (r"\n\n\| \| leaf \(`w`.*", "\n"),
    (r" In this notebook: `grad_out`\.", ""),
    (r"A network is a longer chain,", "A network is a chain of steps,"),
    (r"\A### Upstream and local gradients", "## 1. Upstream and local gradients"),   # its part 1 is left out
    (r"\n\nThe transpose costs nothing: `W\.T` is a \*\*view\*\*.*", "\n"),
    (r" \(Training\s+loops are the subject of notebooks 5 and 6;.*?the idea it builds on\.\)",
     "\n(Sections 5 and 6 explain training; the optimizer here is `torch.optim.Adam`,\na variant of gradient"
     " descent.)"),
    (r" The setup cell packs this into `autograd_derivative\(f, z\)`:", " For ReLU:"),
    (r'print\("autograd_derivative\(torch\.relu\):", autograd_derivative\(torch\.relu, z\)\)\n?', ""),
    (r"\*\*Column form in this section\.\*\* .*?works in that form\.\n\n",
     "Here $x$ is one sample and the layer is written $y = W x$ (`W @ t`), the usual form for Jacobians.\n\n"),
    (r"Instead, every operation comes with a short formula for \$v\^\\top J\$ that never forms \$J\$",
     "PyTorch never builds $J$. Every operation comes with a short formula for $v^\\top J$ instead"),
    (r"The names are those of notebook 3's notation card\. .*?The forward pass is",
     "Here $x$ has $N = 32$ samples of one feature, $W_1$ is $(16, 1)$ and $W_2$ is $(1, 16)$. The forward pass is"),
    (r"\(Here \$\\text\{out\} = 1\$, so \$M = N = 32\$; the check after Exercise 1 has .*?they differ\.\)",
     "(Here $M = N = 32$.)"),
    (r"The next cell checks all seven gradients.*?as well\.",
     "The next cell writes the forward pass, these gradients and the step out as one function, `train_mlp`."),
]
"""Course wording in tagged cells, rewritten for the tutorial: (regular expression, replacement), applied
to the Markdown of every tagged markdown cell and to the code of every tagged code cell. The notebooks
keep their wording."""

COURSE_VOICE = [
    r"\bexercises?\b", r"\byour (function|functions|walk|layer|list|code|answer|relu|graph_nodes|leaf_tensors)\b",
    r"\bsetup cell\b", r"\bcheck cell\b", r"\bthe check after\b", r"\bgrade[ds]?\b", r"\bgrading\b",
    r"\bhidden tests?\b", r"\bthe course\b", r"\bcourse's\b", r"\bcourse pack\b", r"\blearners?\b",
    r"\bstand-ins?\b", r"\byou do not need to read\b", r"\bnotation card\b", r"_sequence_nr\b",
]
"""Phrases of a course, not of a pytorch.org page: none may be left in the script (`render` raises), and
tests/tutorial/test_tutorial.py checks the written file with the same list."""


def course_voice(text: str) -> list[str]:
    """The COURSE_VOICE phrases in `text`, each with its line."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in COURSE_VOICE:
            m = re.search(pattern, line, re.I)
            if m:
                found.append(f"line {number}: {m.group(0)!r} in {line.strip()[:80]!r}")
    return found


def _rewritten(text: str) -> str:
    for pattern, replacement in REWRITES:
        text = re.sub(pattern, lambda m: replacement, text, flags=re.S)
    return text


def _one_check(code: str) -> str:
    """A cell's code without its own verifications (a top-level `assert`; a `print` of `torch.allclose`,
    of an `is` test or of a largest difference; a loop of such prints), used where a CHECKS entry verifies
    the same claim with check_close: one verification per claim."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code

    def verifies(node) -> bool:
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", "") == "print":
            return bool(re.search(r"allclose|equal\(|\.abs\(\)\.max\(\)|\w \bis\b \w", ast.get_source_segment(code, node)))
        if isinstance(node, ast.For):
            return all(verifies(n) for n in node.body)
        return False

    lines = code.splitlines()
    drop = set()
    for node in tree.body:
        if verifies(node):
            drop.update(range(node.lineno - 1, node.end_lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n")


SECTIONS = {
    "01_linear_algebra": """
        A layer ``nn.Linear(in, out)`` stores a weight and a bias and computes one matrix product
        plus a bias. This section writes that product out and checks it against the layer.""",
    "02_activation_functions": """
        Two linear layers with nothing between them are one linear layer. This section proves it,
        then puts ReLU between the layers and computes its derivative, the number that
        ``backward()`` multiplies by at each activation.""",
    "03_chain_rule": """
        ``loss.backward()`` fills the ``.grad`` of every parameter with a product of local
        derivatives: the chain rule. This section computes the same numbers by hand and compares
        them with what ``backward()`` leaves in ``.grad``.""",
    "04_computational_graph": """
        ``backward()`` finds its way from the loss to every weight because the forward pass
        records a graph: every result gets a ``grad_fn`` node, and every parameter an
        ``AccumulateGrad`` node. This section follows that graph by hand.""",
    "05_gradient_descent": """
        ``optimizer.step()`` moves every parameter in place, a small step against its gradient.
        This section prints and draws a layer's parameters before and after one step.""",
    "06_putting_it_together": """
        A training step is three pieces of mathematics: the **forward** pass is linear algebra
        (sections 1 and 2), **backward** is the chain rule (sections 3 and 4) and the **step** is
        optimization (section 5). This section trains a small network twice from the same start,
        once with ``backward()`` and ``torch.optim.SGD`` and once with the formulas written out,
        and compares the two.""",
}
"""The six sections, in order (notebook N is section N), each with its lead paragraph."""

TITLE = "The Mathematics Inside a PyTorch Training Loop"
"""The tutorial's title: its page's heading and its card's on pytorch.org."""

HEADER = '''\
"""
{title}
{rule}

**Author:** {author}

.. grid:: 2

   .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn

      * What ``nn.Linear`` computes, checked against a matrix product written by hand
      * Why a network needs a nonlinearity such as ReLU, and what its derivative is
      * What ``backward()`` computes, checked against the chain rule
      * How autograd records the ``grad_fn`` graph, and where its leaves are
      * What ``optimizer.step()`` does to the parameters
      * How forward, backward and step map to linear algebra, calculus and optimization

   .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites

      * PyTorch (tested with 2.13 and 2.14); a CPU is enough (the tutorial runs in about 10 seconds)
      * Tensors, their shape and indexing
        (`Learn the Basics <https://pytorch.org/tutorials/beginner/basics/intro.html>`__)
      * Matrix products, and the derivative of a function of one variable
"""

######################################################################
# Overview
# --------
#
# A PyTorch training loop is three lines: ``loss = loss_fn(model(x), y)``,
# ``loss.backward()`` and ``optimizer.step()``. Each line is a piece of
# mathematics: a matrix product, the chain rule and a gradient step. This
# tutorial opens each of them, in six steps, and checks every formula
# against PyTorch right after it is stated. It picks up where
# `Build the Neural Network <https://pytorch.org/tutorials/beginner/basics/buildmodel_tutorial.html>`__
# and `Automatic Differentiation <https://pytorch.org/tutorials/beginner/basics/autogradqs_tutorial.html>`__
# stop: they show how to call these three lines, this tutorial what they compute.
#
# Setup
# -----
#
# ``check_close(got, expected, what)`` compares a value computed by hand
# with PyTorch's, by ``torch.testing.assert_close``, and prints what it
# checked; a mismatch stops the tutorial with an error. ``fmt(t)`` prints a
# tensor on one line.

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.functional import jacobian

torch.manual_seed(0)

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}   # float rounding


def check_close(got, expected, what, **tolerance):
    """Compare a tensor computed by hand with PyTorch's; print what was checked."""
    torch.testing.assert_close(got, expected, **(tolerance or TOLERANCE))
    print(f"ok  {what}")


def check_equal(got, expected, what):
    """Compare plain Python values, such as lists of names."""
    assert got == expected, f"{what}: expected {expected}, got {got}"
    print(f"ok  {what}")


'''

CONCLUSION = """\
Conclusion
----------

A training step is three pieces of mathematics, each checked against PyTorch here:

* **forward** is linear algebra: ``nn.Linear`` computes :math:`x W^\\top + b`, and a
  nonlinearity such as ReLU keeps two layers from collapsing into one;
* **backward** is the chain rule: ``backward()`` multiplies upstream by local gradients along the
  ``grad_fn`` graph, from the loss back to the ``.grad`` of the leaves, without building a Jacobian;
* **step** is optimization: ``optimizer.step()`` applies
  :math:`\\theta \\leftarrow \\theta - \\eta\\, \\partial L / \\partial \\theta` in place.

Written out by hand, the three give the losses and parameters of ``backward()`` and
``torch.optim.SGD``, to float rounding.

Further Reading
---------------

* `Automatic Differentiation with torch.autograd <https://pytorch.org/tutorials/beginner/basics/autogradqs_tutorial.html>`__
* `Build the Neural Network <https://pytorch.org/tutorials/beginner/basics/buildmodel_tutorial.html>`__
* `A Gentle Introduction to torch.autograd <https://pytorch.org/tutorials/beginner/blitz/autograd_tutorial.html>`__
* `Autograd mechanics <https://pytorch.org/docs/stable/notes/autograd.html>`__
* `torch.nn.Linear <https://pytorch.org/docs/stable/generated/torch.nn.Linear.html>`__
* `torch.optim.SGD <https://pytorch.org/docs/stable/generated/torch.optim.SGD.html>`__
* `torch.testing.assert_close <https://pytorch.org/docs/stable/testing.html>`__
"""


@dataclass(frozen=True)
class Check:
    code: str
    text: str = ""
    """With text: a block of its own, after the cell's. Without: appended to the cell's block."""
    then: str = ""
    """With text and then: `code` is appended to the cell's block, and `then` is the block after `text`."""


CHECKS: dict[str, Check] = {
    # -- 1. nn.Linear ---------------------------------------------------------------------------
    "7c7eb699": Check("""
        check_close(y_formula, y_layer, "x Wᵀ + b equals layer(x)")"""),
    # -- 2. nonlinearity ------------------------------------------------------------------------
    "fa2de65c": Check("""
        check_close(one_layer, two_layers, "x (W2 W1)ᵀ + (W2 b1 + b2) equals layer2(layer1(x))")"""),
    "47c2b3e6": Check("""
        z_check = torch.linspace(-3, 3, 13)
        check_close(relu(z_check), torch.relu(z_check), "relu(z) equals torch.relu(z)")"""),
    "a9e7586f": Check("""
        check_close(z.grad, (z > 0).float(), "z.grad is relu'(z): 1 where z > 0, 0 elsewhere")"""),
    # -- 3. the chain rule ----------------------------------------------------------------------
    "bd555262": Check("""
        check_close(grad_x, x.grad, "upstream times local, step by step, equals x.grad")"""),
    "e1913380": Check("""
        check_close(jacobian(lambda t: W @ t, x), W, "the Jacobian of x ↦ W x is W")
        check_close(jacobian(lambda t: t ** 2, x), torch.diag(2 * x), "the Jacobian of x ↦ x² is diag(2x)")"""),
    "fa0ae403": Check("""
        check_close(x.grad, v @ W, "y.backward(v) leaves vᵀ J = v W in x.grad")""", text="""
        In a network :math:`v` is not arbitrary: it is the **head gradient** :math:`\\partial L / \\partial y`
        of the loss computed from :math:`y`. Handing it to ``y.backward`` fills the same ``x.grad`` as
        ``L.backward()``:""", then="""
        x.grad = None
        y = W @ x
        L = (y ** 2).sum()                                       # a loss computed from y
        head = torch.autograd.grad(L, y, retain_graph=True)[0]    # ∂L/∂y = 2y
        y.backward(gradient=head, retain_graph=True)
        by_head, x.grad = x.grad, None
        L.backward()
        check_close(by_head, x.grad, "y.backward(∂L/∂y) fills the same x.grad as L.backward()")"""),
    # -- 4. the grad_fn graph -------------------------------------------------------------------
    "a4ed0cca": Check("""
        check_equal((acc_w.variable is w, acc_b.variable is b), (True, True),
                    "the AccumulateGrad nodes hold w and b themselves")"""),
    # -- 5. optimizer.step() --------------------------------------------------------------------
    "cc9c7f30": Check(text="""
        The figure shows each parameter before the step (grey), the step
        :math:`-\\eta\\, \\partial L / \\partial \\theta` (arrow) and the parameter after it.""", code="""
        labels = [f"{name}[{i}]" for name, p in model.named_parameters() for i in range(p.numel())]
        old = torch.cat([before[name].flatten() for name, _ in model.named_parameters()])
        new = torch.cat([p.detach().flatten() for p in model.parameters()])
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.scatter(range(len(old)), old, color="gray", s=60, label="before step()")
        ax.scatter(range(len(new)), new, color="C0", s=60, label="after step()")
        for i, (a, c) in enumerate(zip(old.tolist(), new.tolist())):
            ax.annotate("", xy=(i, c), xytext=(i, a), arrowprops=dict(arrowstyle="->", color="C3"))
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlim(-0.5, len(labels) - 0.5)
        ax.set_ylabel("value"); ax.set_title("one step of SGD, lr = 0.1: θ ← θ − lr · grad"); ax.legend()
        plt.show()"""),
    "0638d47b": Check("""
        check_equal((model.weight is weight_object, model.weight.is_leaf), (True, True),
                    "step() changed model.weight in place: the same object, still a leaf")"""),
    # -- 6. the whole loop ----------------------------------------------------------------------
    "3c342341": Check("""
        check_close(torch.tensor(my_losses), torch.tensor(torch_losses), "the 200 losses by hand equal PyTorch's")
        for key, param in zip(("W1", "b1", "W2", "b2"), model.parameters()):
            check_close(mine[key], param.detach(), f"{key} after 200 steps: by hand equals PyTorch")"""),
}
"""Code run right after a tagged cell (by its id), comparing what it computed with PyTorch."""

HELPERS = {"05_gradient_descent": ["fmt"]}
"""Helpers of the notebooks' setup cells that tagged cells call: copied into the setup block."""

_LEARNER_ONLY = re.compile(r"^\*What you may use\*.*?(?:\n[ \t]*\n|\Z)", re.M | re.S)
"""The paragraph that tells a learner what an exercise may use."""


class TutorialError(ValueError):
    """The tagged cells do not make a tutorial (said with the cell it is about)."""


@dataclass
class Block:
    kind: str           # "text" or "code"
    body: str
    cell: str = ""      # the id of the notebook cell it came from ("" for the frame)


@dataclass
class Section:
    assignment: str
    title: str
    blocks: list[Block]


def _source(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _notebook(assignment: str):
    return nbformat.read(ASSIGNMENTS[assignment].source, as_version=4)


def tagged_cells(assignment: str) -> list:
    return [c for c in _notebook(assignment).cells if TAG in c.metadata.get("tags", [])]


def _title(nb, assignment: str) -> str:
    """The notebook's `# N · Title` heading, without its number."""
    first = _source(nb.cells[0]).splitlines()[0] if nb.cells else ""
    m = re.match(r"#\s+\d+\s*·\s*(.+)", first)
    if not m:
        raise TutorialError(f"{assignment}: the first cell does not start with '# N · Title': {first!r}")
    return m.group(1).strip()


_NUMBERED = re.compile(r"^##\s+(\d+[a-z]?)\.\s+(.*)$", re.M)


@dataclass
class _Numbers:
    """A notebook's numbered parts ("## 3. ...") as this tutorial numbers them: section.part,
    counting only the parts whose heading is in a tagged cell."""
    section: int
    parts: dict[str, str]
    assignment: str
    level: int = 2      # of the last heading: the section's own title is a second-level one

    def depth(self, depth: int) -> int:
        """A heading at most one level below the one before it (reStructuredText allows no jump)."""
        self.level = min(depth, self.level + 1)
        return self.level

    def rewrite(self, text: str) -> str:
        """Plain text: "notebook N" is section N here, and this notebook's "section k", "part k" and
        "§k" are section N.j; "this notebook" and "this course" are this tutorial."""
        def reference(m: re.Match) -> str:
            if m.group("notebook"):
                return ("S" if m.group("notebook")[0] == "N" else "s") + "ection" + m.group("plural") + " " + \
                    m.group("number")
            if m.group("part") not in self.parts:
                raise TutorialError(f"{self.assignment}: a tagged cell refers to {m.group(0)!r}, whose heading "
                                    "is in no tagged cell")
            return ("S" if m.group("word")[0] in "SP" else "s") + "ection " + self.parts[m.group("part")]
        text = re.sub(r"\b(?P<notebook>[Nn]otebook)(?P<plural>s?)\s+(?P<number>[1-6])\b"
                      r"|(?P<word>\b[Ss]ection|\b[Pp]art|§)\s*(?P<part>\d+[a-z]?)\b(?![.,]\d)", reference, text)
        return re.sub(r"\b([Tt]his|the whole) (notebook|course)\b", r"\1 tutorial", text)


def _learner_text_removed(markdown: str) -> str:
    """A markdown cell without its "Exercise" subsection (heading to the end of the cell)."""
    m = re.search(r"^#{1,6}\s+Exercise\b", markdown, re.M)
    return markdown[:m.start()] if m else markdown


def _numbers(nb, assignment: str, section: int) -> _Numbers:
    found = [m.group(1) for c in nb.cells if c.cell_type == "markdown" and TAG in c.metadata.get("tags", [])
             and c.id not in LEFT_OUT
             for m in _NUMBERED.finditer(_learner_text_removed(_rewritten(_source(c))))]
    return _Numbers(section, {k: f"{section}.{j}" for j, k in enumerate(found, 1)}, assignment)


def cell_rst(markdown: str, numbers: _Numbers) -> str:
    """A markdown cell as reStructuredText: its numbered parts renumbered, its headings one level down
    (the section's title is the first level), learner-only text left out."""
    markdown = _LEARNER_ONLY.sub("", _learner_text_removed(markdown))
    markdown = _NUMBERED.sub(lambda m: f"## {numbers.parts[m.group(1)]} {m.group(2)}", markdown)
    return markdown_to_rst(markdown, rewrite=numbers.rewrite, level=lambda level: numbers.depth(level + 1))


def cell_code(cell, assignment: str) -> str:
    code = _SOLUTION_MARKER.sub("", _source(cell)).strip("\n")
    for line in code.splitlines():
        if line.lstrip().startswith(("%", "!")):
            raise TutorialError(f"{assignment} cell {cell.get('id')}: IPython syntax ({line.strip()!r}) "
                                "does not run in a plain Python script")
    return code


def sections() -> list[Section]:
    """The six sections, built from the tagged cells of source/."""
    result = []
    for number, (assignment, lead) in enumerate(SECTIONS.items(), 1):
        nb = _notebook(assignment)
        numbers = _numbers(nb, assignment, number)
        blocks = [Block("text", textwrap.dedent(lead).strip() + "\n")]
        for cell in nb.cells:
            if TAG not in cell.metadata.get("tags", []) or cell.id in LEFT_OUT:
                continue
            if cell.cell_type == "markdown":
                rst = cell_rst(_rewritten(_source(cell)), numbers)
                if not rst.strip():
                    raise TutorialError(f"{assignment} cell {cell.id}: tagged, but nothing of it is left for "
                                        "the tutorial (an Exercise subsection only?)")
                blocks.append(Block("text", rst, cell.id))
            elif cell.cell_type == "code":
                code = cell_code(cell, assignment)
                check = CHECKS.get(cell.id)
                if check and not cell.metadata.get("nbgrader", {}).get("solution"):
                    code = _one_check(code)
                code = _rewritten(code)
                if check and (not check.text or check.then):   # after a definition, two blank lines (PEP 8)
                    gap = "\n\n\n" if re.search(r"^(def|class) ", code, re.M) and code.splitlines()[-1][:1] == " " \
                        else "\n\n"
                    code += gap + textwrap.dedent(check.code).strip("\n")
                blocks.append(Block("code", code, cell.id))
                if check and check.text:
                    blocks.append(Block("text", textwrap.dedent(check.text).strip() + "\n"))
                    blocks.append(Block("code", textwrap.dedent(check.then or check.code).strip("\n")))
        if not any(b.cell for b in blocks if b.kind == "text") or not any(b.cell for b in blocks if b.kind == "code"):
            raise TutorialError(f"section {number} ({assignment}) needs a tagged markdown cell and a tagged code "
                                f"cell: add the tag {TAG!r} to the cells it should show")
        result.append(Section(assignment, _title(nb, assignment), blocks))
    used = {b.cell for section in result for b in section.blocks}
    stale = sorted(set(CHECKS) - used)
    if stale:
        raise TutorialError(f"autograder/tutorial/make.py has checks after cells that are not tagged {TAG!r} (or no "
                            f"longer exist): {', '.join(stale)}")
    return result


def _helpers() -> str:
    """The setup cells' helper functions named in HELPERS, as their source."""
    found = []
    for assignment, names in HELPERS.items():
        setup = next(c for c in _notebook(assignment).cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
        source = _source(setup)
        tree = ast.parse(source)
        for name in names:
            node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
            if node is None:
                raise TutorialError(f"{assignment}: the setup cell defines no {name}()")
            found.append(ast.get_source_segment(source, node))
    return "\n\n\n".join(found) + "\n"


def _comment(rst: str) -> str:
    return "\n".join(("# " + line).rstrip() for line in rst.rstrip("\n").splitlines())


def render(parts: list[Section] | None = None) -> str:
    """The sphinx-gallery script. Raises TutorialError if any COURSE_VOICE phrase is left in it."""
    parts = sections() if parts is None else parts
    header = HEADER.replace("{title}", TITLE).replace("{rule}", "=" * len(TITLE)).replace("{author}", author_rst())
    out = [header + _helpers() + "\n"]
    for number, section in enumerate(parts, 1):
        title = inline(f"{number}. {section.title}")
        out.append(f"\n{SEPARATOR}\n" + _comment(f"{title}\n{'-' * len(title)}") + "\n")
        previous = "text"
        for block in section.blocks:
            if block.kind == "text":
                sep = "#\n" if previous == "text" else f"\n{SEPARATOR}\n"
                out.append(sep + _comment(block.body) + "\n")
            else:
                sep = "" if previous == "text" else f"\n{SEPARATOR}\n"   # a new block, not one long one
                out.append(sep + "\n" + block.body + "\n")
            previous = block.kind
    out.append(f"\n{SEPARATOR}\n" + _comment(CONCLUSION) + "\n")
    script = "".join(out)
    found = course_voice(script)
    if found:
        raise TutorialError("course words left in the tutorial (add a REWRITES entry or leave the cell out): "
                            + "; ".join(found))
    return script


def write(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILENAME
    path.write_text(render())
    return path
