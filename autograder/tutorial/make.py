"""The course as one tutorial in PyTorch's own format: a sphinx-gallery script for pytorch/tutorials.

`python -m autograder tutorial --out DIR` writes DIR/training_loop_math_tutorial.py; with `--html`
it also builds it as pytorch.org does (Sphinx + sphinx-gallery, see `build_site`). docs/tutorial.md
says how to build it and how to contribute it.

One source. The tutorial's body is the cells of source/01-06 whose metadata.tags holds "tutorial",
in notebook order: markdown cells become reStructuredText text blocks (autograder/tutorial/rst.py), code
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
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.instructor.build import _SOLUTION_MARKER
from autograder.course import ASSIGNMENTS
from autograder.tutorial.rst import Options, inline, markdown_to_rst

TAG = "tutorial"
FILENAME = "training_loop_math_tutorial.py"
SEPARATOR = "#" * 70

SECTIONS = {
    "01_linear_algebra": """
        A layer ``nn.Linear(in, out)`` stores a weight and a bias and computes one matrix product
        plus a bias. This section writes that product from sums of products and checks it, entry
        by entry, against the layer.""",
    "02_activation_functions": """
        Two linear layers with nothing between them are one linear layer. This section proves it,
        then adds ReLU and the sigmoid between the layers and computes their derivatives, the
        numbers that ``backward()`` multiplies by at each activation.""",
    "03_chain_rule": """
        ``loss.backward()`` fills the ``.grad`` of every parameter with a product of local
        derivatives: the chain rule. This section computes the same numbers by hand, one step of
        the network at a time, and compares them with what ``backward()`` leaves in ``.grad``.""",
    "04_computational_graph": """
        ``backward()`` finds its way from the loss to every weight because the forward pass
        records a graph: every result gets a ``grad_fn`` node, and every parameter an
        ``AccumulateGrad`` node. This section walks that graph and draws it.""",
    "05_gradient_descent": """
        ``optimizer.step()`` changes the parameters in place, by the rule
        :math:`\\theta \\leftarrow \\theta - \\eta\\, \\partial L / \\partial \\theta`. This section
        prints a layer's parameters before and after one step, draws them, and writes the step,
        with and without momentum, exactly as ``torch.optim.SGD`` does it.""",
    "06_putting_it_together": """
        A training step is three pieces of mathematics, each one of the sections above:

        .. list-table::
           :header-rows: 1

           * - stage of a step
             - mathematics
             - PyTorch
             - in this tutorial
           * - **forward**: compute :math:`\\hat y` and the loss
             - linear algebra
             - ``model(x)``, ``nn.MSELoss()``
             - ``linear_forward``, ``relu``, ``mse_loss`` (sections 1 to 3)
           * - **backward**: :math:`\\partial L / \\partial \\theta` for every parameter
             - calculus: the chain rule
             - ``loss.backward()``
             - ``linear_backward``, ``relu_backward``, ``mlp_backward`` (section 3), the
               ``grad_fn`` graph (section 4)
           * - **step**: move :math:`\\theta` against the gradient
             - optimization
             - ``optimizer.step()``, ``optimizer.zero_grad()``
             - ``sgd_step``, ``sgd_momentum_update`` (section 5)

        This section trains a small network twice from the same start: once with ``backward()``
        and ``torch.optim.SGD``, once with the three formulas written out, and compares the two
        loss curves.""",
}
"""The six sections, in order (notebook N is section N), each with its lead paragraph."""

HEADER = '''\
"""
The Mathematics Inside a PyTorch Training Loop
==============================================

**Author:** the course pack's authors

.. grid:: 2

   .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn

      * What ``nn.Linear`` computes, checked against a matrix product written by hand
      * Why a network needs a nonlinearity, with ReLU's derivative drawn
      * What ``backward()`` computes, checked against the chain rule
      * How autograd records the ``grad_fn`` graph, and where its leaves are
      * What ``optimizer.step()`` does to the parameters
      * How forward, backward and step map to linear algebra, calculus and optimization

   .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites

      * PyTorch v2.3 or later; a CPU is enough (the whole tutorial runs in well under a minute)
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
# against PyTorch right after it is stated.
#
# One notation holds throughout. A batch :math:`x` has shape
# :math:`(N, \\text{in})`, one sample per row. A layer stores
# :math:`W` as :math:`(\\text{out}, \\text{in})` and :math:`b` as
# :math:`(\\text{out},)`, as ``nn.Linear`` does, and computes
# :math:`x W^\\top + b`. The loss is :math:`L`, and the gradient
# :math:`\\partial L / \\partial t` of a tensor :math:`t` is called
# ``grad_t`` in code; it has the shape of :math:`t`.
#
# Setup
# -----
#
# ``check_close(got, expected, what)`` compares a value computed by hand
# with PyTorch's, by ``torch.testing.assert_close``, and prints what it
# checked; a mismatch stops the tutorial with an error.
# ``autograd_derivative(f, z)`` asks autograd for the derivative of an
# elementwise function ``f`` at every entry of ``z`` (section 2 explains
# how), and ``fmt(t)`` prints a tensor on one line.

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.functional import jacobian

torch.manual_seed(0)

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}   # float rounding, as in the course's checks


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

A training step is three pieces of mathematics, and each one was checked against PyTorch:

* **forward** is linear algebra: ``nn.Linear`` computes :math:`x W^\\top + b`, and a
  nonlinearity such as ReLU between two layers is what keeps them from collapsing into one;
* **backward** is the chain rule: ``backward()`` multiplies upstream by local gradients from the
  loss back, node by node along the ``grad_fn`` graph, and leaves the result in the ``.grad`` of
  the leaves; PyTorch never builds a Jacobian, each operation has a short backward formula;
* **step** is optimization: ``optimizer.step()`` applies
  :math:`\\theta \\leftarrow \\theta - \\eta\\, \\partial L / \\partial \\theta` in place, to the
  same tensor objects the model holds.

Written out by hand, the three give the same losses and the same parameters as
``backward()`` and ``torch.optim.SGD``, to float rounding.

Further Reading
---------------

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


CHECKS: dict[str, Check] = {
    # -- 1. nn.Linear ---------------------------------------------------------------------------
    "7c7eb699": Check("""
        check_close(y_formula, y_layer, "x Wᵀ + b equals layer(x)")"""),
    "4b593118": Check("""
        check_close(products.sum(dim=1), A @ B, "the products summed over t equal A @ B")"""),
    "e6594244": Check("""
        A_check, B_check = torch.randn(4, 3), torch.randn(3, 5)
        check_close(matmul(A_check, B_check), A_check @ B_check, "matmul(A, B) equals A @ B for A 4×3, B 3×5")"""),
    "5669f2ea": Check("""
        check_close(linear_forward(x, layer.weight.detach(), layer.bias.detach()), layer(x).detach(),
                    "linear_forward(x, W, b) equals nn.Linear(8, 8)(x)")
        check_close(mine, no_bias(x).detach(), "linear_forward(x, W) equals nn.Linear(8, 5, bias=False)(x)")"""),
    # -- 2. nonlinearity ------------------------------------------------------------------------
    "fa2de65c": Check("""
        check_close(one_layer, two_layers, "x (W2 W1)ᵀ + (W2 b1 + b2) equals layer2(layer1(x))")"""),
    "9ccfd3cc": Check("""
        W, b = collapse_linear(W1, b1, W2, b2)
        check_close(x @ W.T + b, two_layers, "collapse_linear gives the one layer that equals both")"""),
    "f709aea5": Check("""
        check_close(x @ W.T + b, deep, "one collapsed layer equals the stack of five")"""),
    "47c2b3e6": Check("""
        z_check = torch.linspace(-3, 3, 13)
        check_close(relu(z_check), torch.relu(z_check), "relu(z) equals torch.relu(z)")"""),
    "7aa17b80": Check("""
        check_close(y, x.abs(), "relu(x) + relu(-x) equals |x|")"""),
    "a9e7586f": Check("""
        check_close(z.grad, (z > 0).float(), "z.grad is relu'(z): 1 where z > 0, 0 elsewhere")"""),
    "ae017d48": Check("""
        z_check = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0])
        check_close(relu_derivative(z_check), autograd_derivative(torch.relu, z_check),
                    "relu_derivative(z) equals autograd's derivative of torch.relu, also at z = 0")"""),
    "db4db710": Check("""
        z_check = torch.linspace(-6, 6, 13)
        check_close(sigmoid(z_check), torch.sigmoid(z_check), "sigmoid(z) equals torch.sigmoid(z)")"""),
    "d76c709f": Check("""
        check_close(by_hand, autograd_derivative(torch.sigmoid, z), "e^(-z) / (1 + e^(-z))² equals autograd's σ'(z)")"""),
    "42cf5aad": Check("""
        check_close(sigmoid_derivative(z_check), autograd_derivative(torch.sigmoid, z_check),
                    "σ(z) (1 − σ(z)) equals autograd's σ'(z)")"""),
    "940fe7c8": Check("""
        check_close(relu_derivative(z_dots), autograd_derivative(torch.relu, z_dots),
                    "the drawn relu'(z) equals autograd's dots")"""),
    # -- 3. the chain rule ----------------------------------------------------------------------
    "47204b28": Check("""
        check_close(x.grad, torch.tensor(2 * 7 * 3.0), "dy/dx = 2u · 3 = 42 at x = 2")"""),
    "bd555262": Check("""
        check_close(grad_x, x.grad, "upstream times local, step by step, equals x.grad")"""),
    "e1913380": Check("""
        check_close(jacobian(lambda t: W @ t, x), W, "the Jacobian of x ↦ W x is W")
        check_close(jacobian(lambda t: t ** 2, x), torch.diag(2 * x), "the Jacobian of x ↦ x² is diag(2x)")"""),
    "fa0ae403": Check("""
        check_close(x.grad, v @ W, "y.backward(v) leaves vᵀ J = v W in x.grad")"""),
    "c4854c1d": Check("""
        check_close(x.grad, 2 * (v @ W), "a second backward(v) adds: x.grad = 2 vᵀ J")"""),
    "e4a940d8": Check("""
        yh_check, y_check = torch.randn(4, 3), torch.randn(4, 3)
        check_close(mse_loss(yh_check, y_check), F.mse_loss(yh_check, y_check), "mse_loss equals F.mse_loss")"""),
    "3c042a59": Check("""
        check_close(y_hat.grad, 2 * (y_hat - y).detach() / M, "y_hat.grad = 2 (ŷ − y) / M")"""),
    "91af7499": Check("""
        check_close(mse_loss_grad(y_hat.detach(), y), y_hat.grad, "mse_loss_grad equals autograd's ∂L/∂ŷ")"""),
    "f79d61b1": Check("""
        check_close(Wb.grad, G.T @ xb.detach(), "W.grad = Gᵀ x")"""),
    "bf4b05d2": Check("""
        check_close(bb.grad, G.sum(dim=0), "b.grad = G summed over the batch")"""),
    "182bd7bc": Check("""
        check_close(xb.grad, G @ Wb.detach(), "x.grad = G W")"""),
    "75f330ff": Check("""
        grads_by_hand = linear_backward(G, xb.detach(), Wb.detach())
        for label, by_hand, leaf in zip(("x", "W", "b"), grads_by_hand, (xb, Wb, bb)):
            check_close(by_hand, leaf.grad, f"linear_backward: ∂L/∂{label} equals {label}.grad")"""),
    "8279e256": Check("""
        check_close(J, torch.diag((z > 0).float()), "the Jacobian of relu is diag(relu'(z))")"""),
    "90b4748e": Check("""
        z_check = torch.tensor([-1.5, 0.0, 0.3, 2.0], requires_grad=True)
        g_check = torch.tensor([0.5, -1.0, 2.0, 1.5])         # an upstream gradient dL/da
        torch.relu(z_check).backward(g_check)
        check_close(relu_backward(g_check, z_check.detach()), z_check.grad, "relu_backward equals autograd, also at z = 0")"""),
    "09df69a2": Check("""
        mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        x_mlp, y_mlp = torch.randn(6, 3), torch.randn(6, 2)
        F.mse_loss(mlp(x_mlp), y_mlp).backward()
        by_hand = mlp_backward(x_mlp, y_mlp, *(p.detach() for p in mlp.parameters()))
        for key, p in zip(("W1", "b1", "W2", "b2"), mlp.parameters()):
            check_close(by_hand[key], p.grad, f"mlp_backward: ∂L/∂{key} equals the .grad of loss.backward()")"""),
    # -- 4. the grad_fn graph -------------------------------------------------------------------
    "a4ed0cca": Check("""
        check_equal((acc_w.variable is w, acc_b.variable is b), (True, True),
                    "the AccumulateGrad nodes hold w and b themselves")"""),
    "bb2b9e43": Check("""
        check_equal(graph_nodes(y), ["SumBackward0", "MulBackward0", "SinBackward0", "ExpBackward0", "AccumulateGrad",
                                     "CosBackward0"], "graph_nodes lists the graph of sin(a) cos(a) depth first")"""),
    "c3a8a8a7": Check("""
        lin = nn.Linear(3, 2)
        leaves = leaf_tensors(F.mse_loss(lin(torch.randn(4, 3)), torch.randn(4, 2)))
        check_equal(sorted(map(id, leaves)), sorted(map(id, lin.parameters())),
                    "leaf_tensors finds the layer's own weight and bias objects")"""),
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
        plt.show()
        check_close(new - old, -0.1 * torch.cat([p.grad.flatten() for p in model.parameters()]),
                    "the arrows are −lr · grad")"""),
    "202b8c27": Check("""
        check_close(drop / (lr * g_squared), torch.tensor(1.0), "at lr = 0.001 the drop is η‖g‖², to 1%",
                    rtol=0.01, atol=0.0)"""),
    "0638d47b": Check("""
        check_equal((model.weight is weight_object, model.weight.is_leaf), (True, True),
                    "step() changed model.weight in place: the same object, still a leaf")"""),
    "096b6c4b": Check("""
        check_close(w.detach(), torch.tensor([0.95, 2.05]), "w − 0.1 · w.grad, in place")"""),
    "1ed0b48b": Check("""
        check_close(params[0].detach(), torch.tensor([1.0, 2.0]), "the tensor in the list is unchanged")"""),
    "8c6710f1": Check("""
        mine, theirs = nn.Linear(3, 2), nn.Linear(3, 2)
        theirs.load_state_dict(mine.state_dict())
        x_step, y_step = torch.randn(5, 3), torch.randn(5, 2)
        for net in (mine, theirs):
            F.mse_loss(net(x_step), y_step).backward()
        sgd_step(list(mine.parameters()), lr=0.1)
        torch.optim.SGD(theirs.parameters(), lr=0.1).step()
        for (key, p), q in zip(mine.named_parameters(), theirs.parameters()):
            check_close(p.detach(), q.detach(), f"sgd_step: {key} equals torch.optim.SGD's step")"""),
    "cab00005": Check("""
        grads = [torch.tensor([0.3, -0.1, 0.2]), torch.tensor([0.5, 0.5, -0.5]), torch.tensor([-0.2, 0.1, 0.0])]
        for nesterov in (False, True):
            options = dict(lr=0.1, momentum=0.9, dampening=0.0 if nesterov else 0.1, weight_decay=0.01,
                           nesterov=nesterov)
            p_torch = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
            opt = torch.optim.SGD([p_torch], **options)
            p_mine, buf = p_torch.detach().clone(), None
            for g_t in grads:
                p_torch.grad = g_t.clone()
                opt.step()
                p_mine, buf = sgd_momentum_update(p_mine, g_t, buf, **options)
            check_close(p_mine, p_torch.detach(), f"3 steps of sgd_momentum_update equal torch.optim.SGD ({options})")
            check_close(buf, opt.state[p_torch]["momentum_buffer"], "and so does the momentum buffer")"""),
    # -- 6. the whole loop ----------------------------------------------------------------------
    "7fd1d406": Check("""
        for label, by_hand, t in [("ŷ", grad_y_hat, y_hat), ("W2", grad_W2, W2), ("b2", grad_b2, b2), ("h", grad_h, h),
                                  ("z1", grad_z1, z1), ("W1", grad_W1, W1), ("b1", grad_b1, b1)]:
            check_close(by_hand, t.grad, f"∂L/∂{label} by the chain rule equals backward()'s")"""),
    "3c342341": Check("""
        check_close(torch.tensor(my_losses), torch.tensor(torch_losses), "the 200 losses by hand equal PyTorch's")
        for key, param in zip(("W1", "b1", "W2", "b2"), model.parameters()):
            check_close(mine[key], param.detach(), f"{key} after 200 steps: by hand equals PyTorch")"""),
}
"""Code run right after a tagged cell (by its id), comparing what it computed with PyTorch."""

HELPERS = {"02_activation_functions": ["autograd_derivative"], "05_gradient_descent": ["fmt"]}
"""Helpers of the notebooks' setup cells that tagged cells call: copied into the setup block."""

_LEARNER_ONLY = re.compile(r"^\*What you may use\*")


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

    def heading(self, text: str) -> str:
        m = re.match(r"^(\d+[a-z]?)\.\s+(.*)$", text)
        return f"{self.parts[m.group(1)]} {m.group(2)}" if m else text

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
             for m in _NUMBERED.finditer(_learner_text_removed(_source(c)))]
    return _Numbers(section, {k: f"{section}.{j}" for j, k in enumerate(found, 1)}, assignment)


def cell_rst(markdown: str, numbers: _Numbers) -> str:
    return markdown_to_rst(_learner_text_removed(markdown), Options(
        heading_offset=1, heading=numbers.heading, depth=numbers.depth, rewrite=numbers.rewrite,
        drop_paragraph=lambda p: bool(_LEARNER_ONLY.match(p))))


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
            if TAG not in cell.metadata.get("tags", []):
                continue
            if cell.cell_type == "markdown":
                rst = cell_rst(_source(cell), numbers)
                if not rst.strip():
                    raise TutorialError(f"{assignment} cell {cell.id}: tagged, but nothing of it is left for "
                                        "the tutorial (an Exercise subsection only?)")
                blocks.append(Block("text", rst, cell.id))
            elif cell.cell_type == "code":
                code = cell_code(cell, assignment)
                check = CHECKS.get(cell.id)
                if check and not check.text:   # after a definition, two blank lines (PEP 8)
                    gap = "\n\n\n" if re.search(r"^(def|class) ", code, re.M) and code.splitlines()[-1][:1] == " " \
                        else "\n\n"
                    code += gap + textwrap.dedent(check.code).strip("\n")
                blocks.append(Block("code", code, cell.id))
                if check and check.text:
                    blocks.append(Block("text", textwrap.dedent(check.text).strip() + "\n"))
                    blocks.append(Block("code", textwrap.dedent(check.code).strip("\n")))
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
    """The sphinx-gallery script."""
    parts = sections() if parts is None else parts
    out = [HEADER + _helpers() + "\n"]
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
    return "".join(out)


def write(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILENAME
    path.write_text(render())
    return path


# ------------------------------------------------------------------------------------------------
# Built as pytorch.org builds it: Sphinx, sphinx-gallery, PyTorch's theme

CONF = '''\
"""A one-tutorial copy of pytorch/tutorials' Sphinx set-up (conf.py there)."""
import importlib.util
import os

project = "PyTorch Tutorials (one tutorial)"
author = "the course pack's authors"
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
    (root / "conf.py").write_text(CONF)
    (root / "index.rst").write_text(INDEX.format(stem=Path(script.name).stem))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    html = root / "_build" / "html"
    # -W: a warning (a reStructuredText mistake in a tagged cell, a missing image) fails the build
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", str(root),
                          str(html)], env=env, cwd=root, capture_output=True, text=True)
    if run.returncode:
        raise TutorialError(f"the Sphinx build failed:\n{run.stderr[-6000:]}")
    return html / "beginner" / (Path(script.name).stem + ".html")


def main(out: Path, html: bool) -> int:
    path = write(out)
    print(f"tutorial -> {path}")
    if html:
        page = build_site(out / "site", path)
        print(f"html ({theme()}) -> {page}")
    return 0
