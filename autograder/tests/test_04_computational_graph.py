"""Hidden tests: 04_computational_graph (what grad_fn records).

Graphs cannot cross the process boundary, so each one is built twice from the same
trusted recipe source: in the learner's sandbox (as the argument) and here, where the
expected node list and leaf order are read off the live graph. Node names are never
written down in this file: they change between PyTorch versions.
"""

from collections import deque

import pytest
import torch
import torch.nn.functional as F

from autograder.grade.compare import alternatives, described_list, expect_tensor, fail, raised_hint
from autograder.tests.data import rand
from autograder.jail.inside.wire import Recipe, Unsupported
from autograder.tests.repeat import SECOND_CALL, again

ASSIGNMENT = "04_computational_graph"
graded = pytest.mark.graded

F32, F64 = torch.float32, torch.float64

# Runs in the sandbox (globals: torch, NAMED) and here. Every leaf that requires grad is
# stored in NAMED, so the tensors the learner returns can be recognised by identity.
GRAPHS = '''
def _values(seed, *shape, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)


def _linear(n_in, n_out, seed, dtype=torch.float32):
    with torch.random.fork_rng(devices=[]):  # the default init's draws leave the RNG as it was
        layer = torch.nn.Linear(n_in, n_out, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(_values(seed, n_out, n_in, dtype=dtype))
        layer.bias.copy_(_values(seed + 1, n_out, dtype=dtype))
    return layer


def mlp_model(seed, n_in, n_hidden, n_out, dtype=torch.float32, stale=False):
    model = torch.nn.Sequential(_linear(n_in, n_hidden, seed, dtype), torch.nn.ReLU(),
                                _linear(n_hidden, n_out, seed + 2, dtype))
    if stale:   # .grad already holds an earlier gradient, as in a training loop
        for i, p in enumerate(model.parameters()):
            p.grad = _values(seed + 20 + i, *p.shape, dtype=dtype)
    relu_runs = []   # how many forward passes went through the ReLU (reported back after a call)
    model[1].register_forward_hook(lambda module, inputs, output: relu_runs.append(1))
    NAMED["model"], NAMED["relu_runs"] = model, relu_runs
    return model


def mlp_loss(seed, n, n_in, n_hidden, n_out):
    model = mlp_model(seed, n_in, n_hidden, n_out)
    x, y = _values(seed + 10, n, n_in), _values(seed + 11, n, n_out)
    return torch.nn.functional.mse_loss(model(x), y)


def affine_sum(seed):
    w = _values(seed, 3).requires_grad_()
    b = _values(seed + 1, ()).requires_grad_()
    NAMED["w"], NAMED["b"] = w, b
    return (w * _values(seed + 2, 3) + b).sum()


def sin_cos(seed):
    w = _values(seed, 2).requires_grad_()
    NAMED["w"] = w
    a = w.exp()
    return (a.sin() * a.cos()).sum()


def shared_product(seed):
    w = _values(seed, 4).requires_grad_()
    NAMED["w"] = w
    h = w * _values(seed + 1, 4)
    return (h * h + h.tanh()).sum()


def two_depths(seed):
    w = _values(seed, 3).requires_grad_()
    v = _values(seed + 1, 3).requires_grad_()
    NAMED["w"], NAMED["v"] = w, v
    s = w.exp()
    return ((s * v.sin()) + s).sum()     # exp(w) feeds the sum directly and, one level down, the product


def tied_layer(seed):
    layer = _linear(4, 4, seed)
    NAMED["layer"] = layer
    x = _values(seed + 5, 3, 4)
    return layer(torch.relu(layer(x))).pow(2).mean()


def linear_1d(seed):
    layer = _linear(3, 2, seed)
    NAMED["layer"] = layer
    return (layer(_values(seed + 5, 3)) - 1).pow(2).sum()


def input_leaf(seed):
    x = _values(seed, 5, 3).requires_grad_()
    W = _values(seed + 1, 3, 2).requires_grad_()
    NAMED["x"], NAMED["W"] = x, W
    return x.exp().sin().cos().sum() + (W.sum() + (x.tanh() @ W).pow(2).sum())


def float64_chain(seed):
    a = _values(seed, 2, 3, dtype=torch.float64).requires_grad_()
    b = _values(seed + 1, 3, dtype=torch.float64).requires_grad_()
    NAMED["a"], NAMED["b"] = a, b
    c = (a * b).relu()
    return (c.sum(0) * b).exp().mean() + (a - 1).abs().sum()


def second_output(seed):
    w = _values(seed, 4).requires_grad_()
    NAMED["w"] = w
    return (w.exp().chunk(2)[1] * 3).sum()   # the product reaches chunk's node by its output 1


def equal_leaves(seed):
    v, s = _values(seed, 3), _values(seed + 1, ())
    a, b = v.clone().requires_grad_(), v.clone().requires_grad_()   # distinct leaves, equal values
    c, d = s.clone().requires_grad_(), s.clone().requires_grad_()   # two 0-d ones, equal values
    NAMED.update(a=a, b=b, c=c, d=d)
    h = a * b                                                       # h is used twice
    return (h * c + h.sin() * d).sum()


def equal_scalars(seed):
    s = _values(seed, ())
    c, d, e = s.clone().requires_grad_(), s.clone().requires_grad_(), _values(seed + 1, ()).requires_grad_()
    NAMED.update(c=c, d=d, e=e)
    return (c * e) * (d + e)


def no_graph(kind):
    w = _values(0, 3).requires_grad_()
    NAMED["w"] = w
    if kind == "leaf":
        return w
    if kind == "no_grad":
        with torch.no_grad():
            return (w * 2).sum()
    return _values(1, 3) * 2


_KEPT = []


def padded(pad, name, *args):
    """The graph `name`, built after 64 tensors were made and all but `pad` freed in a shuffled
    order: its tensors and nodes take the freed places, at other addresses and in another order,
    which is what a set's order follows (the walk's order does not change)."""
    holes = [torch.zeros(()) for _ in range(64)]
    order = torch.randperm(64, generator=torch.Generator().manual_seed(pad)).tolist()
    _KEPT.append([holes[i] for i in order[:pad]])
    for i in order[pad:]:
        holes[i] = None
    return globals()[name](*args)
'''


def build(name: str, *args):
    """Run the recipe here: (the live tensor or module, the NAMED dict)."""
    named: dict = {}
    scope = {"torch": torch, "NAMED": named}
    exec(compile(GRAPHS, "<graph recipes>", "exec"), scope)
    return scope[name](*args), named


def recipe(name: str, *args, label: str = "") -> Recipe:
    return Recipe(GRAPHS, name, args, label)


def authoring_check(condition: bool, message: str) -> None:
    """A broken test is the grader's fault: RuntimeError is reported as an internal error."""
    if not condition:
        raise RuntimeError(f"authoring error in {__name__}: {message}")


# ---------------------------------------------------------------------------
# Walks of the live graph: the right one, and the ones learners write by mistake.

def _children(node, reverse=False):
    """The nodes `node` points to, None left out."""
    kids = [child for child, _ in node.next_functions if child is not None]
    return kids[::-1] if reverse else kids


def dfs(t, *, once=True, by_name=False, post=False, reverse=False, skip_root=False):
    """Depth-first pre-order walk from t.grad_fn (the contract's), or a mistaken variant of it."""
    out, seen = [], set()

    def visit(node):
        key = type(node).__name__ if by_name else node
        if once and key in seen:
            return
        seen.add(key)
        if not post:
            out.append(node)
        for child in _children(node, reverse):
            visit(child)
        if post:
            out.append(node)

    if t.grad_fn is not None:
        if skip_root:
            for child in _children(t.grad_fn):
                visit(child)
        else:
            visit(t.grad_fn)
    return out


def bfs(t):
    """Breadth-first walk, each node once (a common mistake)."""
    if t.grad_fn is None:
        return []
    out, seen, queue = [], {t.grad_fn}, deque([t.grad_fn])
    while queue:
        node = queue.popleft()
        out.append(node)
        for child in _children(node):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return out


def first_child_chain(t):
    """A walk that follows only next_functions[0] of each node, as a chain (a common mistake)."""
    out, node = [], t.grad_fn
    while node is not None:
        out.append(node)
        node = node.next_functions[0][0] if node.next_functions else None
    return out


def stack_marked_on_push(t):
    """An iterative walk that marks nodes seen when pushed (not pre-order)."""
    if t.grad_fn is None:
        return []
    out, seen, stack = [], {t.grad_fn}, [t.grad_fn]
    while stack:
        node = stack.pop()
        out.append(node)
        for child in reversed(_children(node)):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return out


def names(nodes) -> list[str]:
    """The nodes' names, as graph_nodes returns them."""
    return [type(n).__name__ for n in nodes]


def _dedup(items):
    return list(dict.fromkeys(items))


def walk_mistakes(t):
    """hint -> the node list that mistake gives (for graph_nodes and leaf_tensors)."""
    return {
        "this is breadth first (level by level). Walk depth first: after listing a node, walk the "
        "whole sub-graph of its first child before its second child (a recursive visit(node)).":
            bfs(t),
        "a node is listed more than once. A node reached along two arrows (a tensor used twice) "
        "is one node: keep a set of the nodes already seen and skip them.":
            dfs(t, once=False),
        "nodes that are different but share a name were merged. Remember the nodes themselves in "
        "your `seen` set, not their names: a graph can have two AddmmBackward0 nodes.":
            dfs(t, by_name=True),
        "this is post-order (children before their parent). Pre-order lists a node first, then "
        "walks its children.": dfs(t, post=True),
        "the children are walked last to first. Follow node.next_functions in order (with a "
        "stack, push them in reverse).": dfs(t, reverse=True),
        "the walk marks nodes as seen when it puts them on the stack; mark them when it visits "
        "them, or use a recursive visit(node).": stack_marked_on_push(t),
        "t.grad_fn itself is missing: the list starts with the root node.": dfs(t, skip_root=True),
        "the walk follows only the first child of each node (next_functions[0]); visit every "
        "child, in order: `for child, _ in node.next_functions:`.": first_child_chain(t),
    }


def walk_hint(matches: list[str]) -> str:
    """The hint for the mistakes whose walk gives the learner's list: one, or each of several
    (on a small graph two mistakes can give the same order; never blame just one of them)."""
    return alternatives(matches)


REVERSED = ("the list is in reverse order (last node first): build it in the order the walk "
            "visits the nodes (append, not insert(0, ...), and no reversed() at the end).")
EMPTY_AGAIN = ("a second walk of the same graph returned nothing: does {name} keep its `seen` "
               "set between calls (a mutable default argument like seen=set() is made once and "
               "shared by every call)? Make the set inside the function.")
EARLIER = ("the list starts with {what} from an earlier call: does {name} keep its list between "
           "calls (a mutable default argument like out=[] is made once and shared by every "
           "call)? Make the list inside the function.")


def repeat_hint(name: str, got: list, expected: list, walks: int) -> str:
    """The hint for a list that a state kept between calls gives: [] on a second walk of the
    same graph (the seen set kept), or the earlier calls' items followed by this graph's."""
    if walks > 1 and got == [] and expected:
        return alternatives([EMPTY_AGAIN.format(name=name)])
    extra = got[:len(got) - len(expected)]   # leaf_tensors: tensors not of this graph are None
    if extra and got[len(extra):] == expected and (name == "graph_nodes" or set(extra) == {None}):
        what = "names" if name == "graph_nodes" else "tensors"
        return alternatives([EARLIER.format(name=name, what=what)])
    return ""


SKIP_NONE = ("skip None: t.grad_fn is None for a tensor without a graph, and next_functions "
             "holds None for inputs that need no gradient.")


COMPARED_BY_VALUE = ("must match the size of tensor",)
"""Errors that `leaf in leaves` gives when it compares tensors of other shapes with ==."""


ADDRESS_ORDER = ("{what}: walks of the same graph built with its tensors at other memory "
                 "addresses returned {first} and then {other}: the order follows the objects' "
                 "addresses, which is the order of a set (or of a dict keyed by id()), not the "
                 "walk's. Keep a set only to know what was seen; append each item to a list "
                 "when the walk visits it, and return the list.")


def address_order(student, function: str, name: str, args: tuple, got: list, read,
                  tries: int = 5) -> list | None:
    """Another answer of the learner's function for the same graph built at other addresses
    (`padded`, `tries` layouts), when one differs from `got` (read with `read`); None when every
    one agrees. A right answer is tried once (a call more per check: an expensive learner function
    spends the notebook's time budget, which its other functions share); a wrong one up to 5 times."""
    for pad in range(1, tries + 1):
        reply = student.call(function, recipe("padded", pad, name, *args, label="t"))
        if reply.status == "ok" and isinstance(reply.value, (list, tuple)):
            other = read(reply.value)
            if other != got and sorted(map(str, other)) == sorted(map(str, got)):
                return other
    return None


def call_walk(student, function: str, name: str, args: tuple, about: str, walks: int = 1):
    """The learner's graph_nodes / leaf_tensors for the recipe's tensor, or a failed test;
    with walks=2, the answer of a second call on the same graph (SECOND_CALL)."""
    t = recipe(name, *args, label="t")
    reply = student.call(function, t) if walks == 1 else student.drive(function, SECOND_CALL, t)
    about = about or name
    context = f"Here {about}." if about.startswith("t = ") else f"Here t is {about}."
    hint = raised_hint(reply)
    if not hint and reply.status == "exception" and "NoneType" in reply.exception.message:
        hint = SKIP_NONE[0].upper() + SKIP_NONE[1:]
    if function == "leaf_tensors" and reply.status == "exception" and any(
            phrase in reply.exception.message for phrase in COMPARED_BY_VALUE):
        hint = ("`leaf in leaves` compares tensors with ==, value by value, which fails for "
                "tensors of different shapes (and merges distinct leaves of equal values): "
                "compare identities, `any(leaf is u for u in leaves)`, or keep a set of nodes.")
    return student.result(function, reply, (t,), hint=hint, about=context)


# Graphs on which the mistaken walks differ from one another (and from the right walk); when
# several mistakes give the learner's list on a test's graph, the learner's function is called
# on these too, and only the mistakes that give its list on every one of them are named.
TELLERS = (("mlp_loss", (3, 5, 3, 4, 2)), ("two_depths", (8,)), ("input_leaf", (6,)),
           ("equal_leaves", (4,)), ("tied_layer", (4,)), ("float64_chain", (7,)))


def narrow(student, function: str, matches: list[str], values) -> list[str]:
    """The mistakes among `matches` whose value is the learner's on other graphs too.

    `values(t, named)` maps each hint to what that mistake returns for the live graph t
    (names for graph_nodes, origins for leaf_tensors); the learner's answer is read the same
    way. A graph where the remaining mistakes agree tells nothing and is skipped; a call that
    fails leaves the list as it is."""
    for name, args in TELLERS:
        if len(matches) < 2:
            break
        t, named = build(name, *args)
        wrong = values(t, named)
        if len({repr(wrong[h]) for h in matches}) < 2:
            continue
        reply = student.call(function, recipe(name, *args, label="t"))
        if reply.status != "ok" or not isinstance(reply.value, (list, tuple)):
            continue
        got = list(reply.value) if function == "graph_nodes" else [
            getattr(getattr(g, "info", None), "origin", None) for g in reply.value]
        matches = [h for h in matches if wrong[h] == got]
    return matches


def _show(items: list) -> str:
    text = ", ".join(map(str, items))
    return f"[{text}]" if len(text) < 400 else f"[{text[:400]}, ...] ({len(items)} items)"


# ---------------------------------------------------------------------------
# graph_nodes

def check_graph_nodes(student, name: str, *args, about: str = "", walks: int = 1):
    t, _ = build(name, *args)
    expected = names(dfs(t))
    got = call_walk(student, "graph_nodes", name, args, about, walks)
    what = f"graph_nodes(t) for {about or name}" + (
        ", called a second time on the same graph" if walks > 1 else "")
    if isinstance(got, (list, tuple)) and got and all(isinstance(g, Unsupported) for g in got):
        fail(f"{what} returned a list of node objects; return their names, "
             f"type(node).__name__, e.g. {expected[0]!r}.")
    if not isinstance(got, (list, tuple)) or not all(isinstance(g, str) for g in got):
        kind = got.type_name if isinstance(got, Unsupported) else type(got).__name__
        fail(f"{what} returned a {kind}; expected a list of node names (strings), "
             f"here {_show(expected)}.")
    got = list(got)
    if sorted(got) == sorted(expected) and walks == 1:
        other = address_order(student, "graph_nodes", name, args, got, list,
                              tries=1 if got == expected else 5)
        if other is not None:
            fail(ADDRESS_ORDER.format(what=what, first=_show(got), other=_show(other)))
    if got == expected:
        return
    def node_values(tt, _named):
        out = {text: names(wrong) for text, wrong in walk_mistakes(tt).items()}
        out[REVERSED] = names(dfs(tt))[::-1]
        return out
    matches = [text for text, wrong in node_values(t, None).items() if wrong == got != expected]
    hint = repeat_hint("graph_nodes", got, expected, walks) or walk_hint(
        narrow(student, "graph_nodes", matches, node_values))
    if not hint and got == _dedup(names(dfs(t, once=False))):
        hint = ("\nHint: nodes that are different but share a name were merged: keep the nodes "
                "themselves in your `seen` set, not their names.")
    if not hint and "NoneType" in got and "NoneType" not in expected:
        hint = ("\nHint: your list holds 'NoneType', the type of None, which is not a node: skip "
                "None (next_functions holds None for inputs that need no gradient).")
    first = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e),
                 min(len(got), len(expected)))
    fail(f"{what} returned {len(got)} names, {_show(got)}; expected {len(expected)}, "
         f"{_show(expected)} (first difference at position {first})."
         f"{hint or described_list(got, expected, 'nodes')}")


@graded("graph_nodes", points=1, visible=True)
def test_graph_nodes_notebook_graphs(student):
    """the notebook's graphs sum(w * x + b) and sum(sin(a) cos(a)), depth first"""
    check_graph_nodes(student, "affine_sum", 0, about="t = sum(w * x + b)")
    check_graph_nodes(student, "sin_cos", 1, about="t = sum(sin(a) cos(a)), a = exp(w)")


@graded("graph_nodes", points=1, visible=True)
def test_graph_nodes_no_grad_fn(student):
    """a tensor without grad_fn (a leaf, a result computed under no_grad, plain data) gives []"""
    for kind in ("leaf", "no_grad", "data"):
        check_graph_nodes(student, "no_graph", kind, about=f"a tensor without grad_fn ({kind})")


@graded("graph_nodes", points=1)
def test_graph_nodes_mlp(student):
    """the loss of a 2-layer network, a node reached at two depths: depth first, pre-order"""
    t, _ = build("mlp_loss", 3, 5, 3, 4, 2)
    authoring_check(names(dfs(t)) != names(bfs(t)), "mlp_loss must tell DFS from BFS")
    check_graph_nodes(student, "mlp_loss", 3, 5, 3, 4, 2,
                      about="the MSE loss of nn.Sequential(Linear(3, 4), ReLU(), Linear(4, 2))")
    t, _ = build("two_depths", 8)
    authoring_check(names(dfs(t)) != names(stack_marked_on_push(t)),
                    "two_depths must tell DFS from a stack that marks nodes when pushed")
    check_graph_nodes(student, "two_depths", 8, about="t = sum(s * sin(v) + s), s = exp(w)")


@graded("graph_nodes", points=1, visible=True)
def test_graph_nodes_shared(student):
    """nodes reached twice (a tensor used twice, a layer used twice) are listed once; a second
    walk of the same graph gives the same list"""
    for name in ("shared_product", "tied_layer", "equal_leaves"):
        t, _ = build(name, 4)
        authoring_check(len(dfs(t, once=False)) > len(dfs(t)), f"{name} must reach a node twice")
    check_graph_nodes(student, "shared_product", 4, about="t = sum(h * h + tanh(h)), h = w * x")
    check_graph_nodes(student, "tied_layer", 4,
                      about="the same nn.Linear applied twice (tied weights)")
    check_graph_nodes(student, "equal_leaves", 4, walks=2,
                      about="t = sum(h * c + sin(h) * d), h = a * b")


@graded("graph_nodes", points=1)
def test_graph_nodes_other_graphs(student):
    """a 1-D input to nn.Linear, an input that requires grad, a float64 graph, a second output"""
    check_graph_nodes(student, "linear_1d", 5, about="nn.Linear(3, 2) applied to a 1-D input")
    check_graph_nodes(student, "second_output", 8,
                      about="t = sum(3 * exp(w).chunk(2)[1]), whose product reaches chunk's node "
                            "through the node's second output (next_functions entry (node, 1))")
    check_graph_nodes(student, "input_leaf", 6, about="a graph where the input x requires grad")
    check_graph_nodes(student, "float64_chain", 7, about="a float64 graph")


# ---------------------------------------------------------------------------
# leaf_tensors

def _origins(named: dict) -> dict[int, str]:
    """id(tensor) -> the name the sandbox reports as its origin."""
    out = {}
    for key, value in named.items():
        if isinstance(value, torch.Tensor):
            out[id(value)] = key
        elif isinstance(value, torch.nn.Module):
            out.update({id(p): f"{key}.{n}" for n, p in value.named_parameters()})
    return out


def _leaf_origins(nodes, origin_of) -> list[str]:
    return [origin_of[id(n.variable)] for n in nodes if hasattr(n, "variable")]


def check_leaf_tensors(student, name: str, *args, about: str = "", walks: int = 1):
    t, named = build(name, *args)
    origin_of = _origins(named)
    leaves = [n.variable for n in dfs(t) if hasattr(n, "variable")]
    authoring_check(all(id(v) in origin_of for v in leaves), f"{name} keeps a leaf out of NAMED")
    expected = [origin_of[id(v)] for v in leaves]
    got = call_walk(student, "leaf_tensors", name, args, about, walks)
    what = f"leaf_tensors(t) for {about or name}" + (
        ", called a second time on the same graph" if walks > 1 else "")
    if not isinstance(got, (list, tuple)):
        kind = got.type_name if isinstance(got, Unsupported) else type(got).__name__
        fail(f"{what} returned a {kind}; expected a list of tensors ({len(expected)} here).")
    for i, item in enumerate(got):
        if isinstance(item, str):
            fail(f"{what}: item {i} is the string {item!r}; return the leaf tensors themselves "
                 "(node.variable of each AccumulateGrad node), not names.")
        if not isinstance(item, torch.Tensor):
            kind = item.type_name if isinstance(item, Unsupported) else type(item).__name__
            fail(f"{what}: item {i} is a {kind}, not a tensor. An AccumulateGrad node keeps its "
                 "leaf in node.variable: return that.")
    got_origins = [g.info.origin for g in got]
    if None not in got_origins and sorted(got_origins) == sorted(expected) and walks == 1:
        other = address_order(student, "leaf_tensors", name, args, got_origins,
                              lambda value: [getattr(getattr(g, "info", None), "origin", None)
                                             for g in value],
                              tries=1 if got_origins == expected else 5)
        if other is not None:
            fail(ADDRESS_ORDER.format(what=what, first=_show(got_origins), other=_show(other)))
    if got_origins == expected:
        return
    described = [o if o is not None else f"a new tensor {tuple(g.shape)}" for o, g in zip(got_origins, got)]
    hint = repeat_hint("leaf_tensors", got_origins, expected, walks)
    if not hint and None in got_origins and all(
            o is not None or _copy_of_leaf(g, leaves) for o, g in zip(got_origins, got)):
        hint = ("\nHint: some of the tensors are copies, not the leaves themselves. Return "
                "node.variable as it is: .clone(), .detach(), .data or torch.tensor(...) make a "
                "new tensor object, and an optimizer could not update the model through it.")
    if not hint and None not in got_origins:
        def leaf_values(tt, named_here):
            origins = _origins(named_here)
            out = {text: _leaf_origins(wrong, origins) for text, wrong in walk_mistakes(tt).items()}
            out.update(identity_mistakes(tt, origins))
            out[REVERSED] = _leaf_origins(dfs(tt), origins)[::-1]
            return out
        matches = [text for text, wrong in leaf_values(t, named).items()
                   if wrong == got_origins != expected]
        hint = walk_hint(narrow(student, "leaf_tensors", matches, leaf_values))
    fail(f"{what} returned {_show(described)}; expected the leaves {_show(expected)}, in "
         f"this order, each the very tensor object (compared with `is`)."
         f"{hint or described_list(described, expected, 'leaves')}")


def _copy_of_leaf(tensor, leaves) -> bool:
    """Whether a returned tensor that is none of the leaves is a copy of one: it shares a
    leaf's memory (a .detach(), .data or a view) or holds a leaf's values (a .clone())."""
    if tensor.info.shares is not None:
        return True
    return any(tensor.shape == leaf.shape and tensor.dtype == leaf.dtype
               and torch.equal(tensor.detach(), leaf.detach()) for leaf in leaves)


def identity_mistakes(t, origin_of) -> dict[str, list[str]]:
    """hint -> the leaves (as origins) that leaf_tensors gives when it merges leaves by value."""
    leaves = [n.variable for n in dfs(t) if hasattr(n, "variable")]
    kept: list = []
    for leaf in leaves:
        if not any(leaf.shape == k.shape and leaf.dtype == k.dtype and torch.equal(leaf, k)
                   for k in kept):
            kept.append(leaf)
    return {
        "two distinct leaves with equal values are different tensors, and both are leaves: "
        "compare by identity (`is`, id(), or a set of the nodes), not by value (torch.equal, "
        "==, `in` on a list of 0-d tensors).": [origin_of[id(v)] for v in kept],
    }


@graded("leaf_tensors", points=1, visible=True)
def test_leaf_tensors_notebook_graphs(student):
    """the leaves of sum(w * x + b) and of a 2-layer network's loss are the tensors themselves"""
    check_leaf_tensors(student, "mlp_loss", 1, 5, 3, 4, 2,     # 4 leaves: mistaken orders differ
                       about="the MSE loss of nn.Sequential(Linear(3, 4), ReLU(), Linear(4, 2))")
    check_leaf_tensors(student, "affine_sum", 0, about="t = sum(w * x + b)")


@graded("leaf_tensors", points=1, visible=True)
def test_leaf_tensors_no_grad_fn(student):
    """a tensor without grad_fn gives []"""
    for kind in ("leaf", "no_grad", "data"):
        check_leaf_tensors(student, "no_graph", kind, about=f"a tensor without grad_fn ({kind})")


@graded("leaf_tensors", points=1, visible=True)
def test_leaf_tensors_shared(student):
    """a parameter reached twice (tied weights, a tensor used twice) is listed once; distinct
    leaves of equal values are each listed; a second walk of the same graph gives the same list"""
    for name, about in (("equal_leaves", "t = sum(h * c + sin(h) * d), h = a * b, where a and b "
                                          "hold equal values, and so do the 0-d c and d"),
                        ("equal_scalars", "t = (c * e) * (d + e), where the 0-d c and d hold "
                                          "equal values")):
        t, named = build(name, 5)
        origin_of = _origins(named)
        authoring_check(identity_mistakes(t, origin_of) and all(
            wrong != _leaf_origins(dfs(t), origin_of) for wrong in identity_mistakes(t, origin_of).values()),
            f"{name} must have distinct leaves of equal values")
        check_leaf_tensors(student, name, 5, about=about)
    check_leaf_tensors(student, "tied_layer", 2, about="the same nn.Linear applied twice")
    check_leaf_tensors(student, "shared_product", 3, about="t = sum(h * h + tanh(h)), h = w * x")
    check_leaf_tensors(student, "sin_cos", 4, about="t = sum(sin(a) cos(a)), a = exp(w)")
    check_leaf_tensors(student, "tied_layer", 6, walks=2, about="the same nn.Linear applied twice")


@graded("leaf_tensors", points=1)
def test_leaf_tensors_order(student):
    """inputs that require grad are leaves too; order of the depth-first walk; float64"""
    t, named = build("input_leaf", 5)
    origin_of = _origins(named)
    authoring_check(_leaf_origins(dfs(t), origin_of) != _leaf_origins(bfs(t), origin_of),
                    "input_leaf must tell DFS from BFS")
    check_leaf_tensors(student, "input_leaf", 5, about="a graph where the input x requires grad")
    t, named = build("two_depths", 9)
    authoring_check(_leaf_origins(dfs(t), _origins(named))
                    != _leaf_origins(stack_marked_on_push(t), _origins(named)),
                    "two_depths must tell DFS from a stack that marks nodes when pushed")
    check_leaf_tensors(student, "two_depths", 9, about="t = sum(s * sin(v) + s), s = exp(w)")
    check_leaf_tensors(student, "float64_chain", 6, about="a float64 graph")
    check_leaf_tensors(student, "linear_1d", 7, about="nn.Linear(3, 2) applied to a 1-D input")
    check_leaf_tensors(student, "second_output", 8,
                       about="t = sum(3 * exp(w).chunk(2)[1]), whose product reaches chunk's node "
                             "through the node's second output (next_functions entry (node, 1))")


# ---------------------------------------------------------------------------
# hidden_grad

def reference_hidden_grad(seed, sizes, x, y, dtype, stale=False):
    """(dL/dh, dL/dz, {parameter name: its .grad}) for a fresh copy of the recipe's model."""
    model, _ = build("mlp_model", seed, *sizes, dtype, stale)
    z = model[0](x)
    z.retain_grad()
    h = model[1](z)
    h.retain_grad()
    F.mse_loss(model[2](h), y).backward()
    grads = {f"model.{n}": p.grad for n, p in model.named_parameters()}
    return h.grad, z.grad, grads, model


NO_RETAIN = ("return h.grad, and call h.retain_grad() before L.backward() (or register a hook on "
             "h): h is not a leaf, so without it backward() does not keep its gradient and h.grad "
             "stays None.")
SECOND_FORWARD = ("compute L from your h: L = F.mse_loss(model[2](h), y). Your function ran the "
                  "network forward more than once: a second forward pass (model(x)) makes a new h, "
                  "and backward() from that loss never reaches the h whose gradient you kept, so "
                  "its .grad stays None.")
SUMMED = ("the loss was summed, not averaged: F.mse_loss (mean) divides by the number of entries, "
          "N · out.")
NOTHING_STORED = ("no parameter's .grad holds a gradient after the call: either the gradients "
                  "were never stored (torch.autograd.grad returns them without putting them in "
                  ".grad) or they were cleared after backward() (model.zero_grad(), p.grad = "
                  "None). Call L.backward() once, which fills .grad and, with h.retain_grad(), "
                  "h.grad, and leave .grad as it fills it.")
DETACHED = ("the first layer's parameters got no gradient, the last layer's did: backward() "
            "stopped at h, so h was cut from the graph (h.detach(), h.data, or a new leaf made "
            "from h's values). Keep h as the ReLU gives it and call h.retain_grad() on it.")
NO_BACKWARD = ("L.backward() was not called: every parameter's .grad is still None. Compute L = "
               "F.mse_loss(model[2](h), y), call L.backward(), then return h.grad.")


def call_hidden_grad(student, seed, sizes, x, y, dtype=F32, stale=False):
    model_arg = recipe("mlp_model", seed, *sizes, dtype, stale, label=f"nn.Sequential(Linear({sizes[0]}, "
                       f"{sizes[1]}), ReLU(), Linear({sizes[1]}, {sizes[2]}))")
    reply = student.call("hidden_grad", model_arg, x, y)
    hint = ""
    if reply.status == "exception" and "backward through the graph a second time" in reply.exception.message:
        hint = "call L.backward() once; everything you need is kept after that single call."
    value = student.result("hidden_grad", reply, (model_arg, x, y), hint=hint)
    return reply, value


def check_hidden_grad(student, seed, sizes, x, y, dtype=F32, about=""):
    dh, dz, _, model = reference_hidden_grad(seed, sizes, x, y, dtype)
    reply, got = call_hidden_grad(student, seed, sizes, x, y, dtype)
    what = f"hidden_grad(model, x, y) for {about}"
    if got is None:
        params = [p for p in (reply.named_after or {}).values() if isinstance(p, torch.Tensor)]
        untouched = bool(params) and all(p.info.grad is None for p in params)
        runs = (reply.named_after or {}).get("relu_runs")
        again = isinstance(runs, list) and len(runs) > 1
        fail(f"{what} returned None.\nHint: "
             f"{NO_BACKWARD if untouched else SECOND_FORWARD if again else NO_RETAIN}")
    with torch.no_grad():
        y_hat = model(x)
    mistakes = {
        "this is dL/dz, the gradient before the ReLU (the output of model[0]). h is the output "
        "of model[1], after the ReLU.": lambda: dz,
        "this is twice dL/dh: gradients add up, and backward() ran twice. Call L.backward() "
        "once.": lambda: 2 * dh,
        SUMMED: lambda: dh * y_hat.numel(),
        "the loss was averaged over the batch only; F.mse_loss divides by every entry, N · out.":
            lambda: dh * (y_hat.numel() / y_hat.shape[0] if y_hat.dim() == 2 else 1.0),
        "this is dL/dŷ (the gradient at the output), not dL/dh.":
            lambda: 2 * (y_hat - y) / y_hat.numel(),
    }
    expect_tensor(got, dh, what, mistakes=mistakes)
    return reply


@graded("hidden_grad", points=1, visible=True)
def test_hidden_grad_batch(student):
    """dL/dh matches autograd for a batch of 6 (3 inputs, 4 hidden units, 3 outputs), called
    twice with the same inputs, then with others"""
    # 3 outputs: with 2, averaging over the batch only (x out) and a second backward() (x2)
    # would give one value
    x, y = rand(6, 3, seed=40), rand(6, 3, seed=41)
    again(check_hidden_grad, student, 40, (3, 4, 3), x, y, about="a batch of 6", name="hidden_grad")
    check_hidden_grad(student, 44, (3, 4, 3), rand(6, 3, seed=42), rand(6, 3, seed=43),
                      about="another batch of 6")


@graded("hidden_grad", points=1, visible=True)
def test_hidden_grad_parameter_grads(student):
    """every parameter's .grad afterwards is what L.backward() gives"""
    sizes, x, y = (3, 5, 2), rand(7, 3, seed=50), rand(7, 2, seed=51)
    _, _, expected, _ = reference_hidden_grad(50, sizes, x, y, F32)
    reply, _ = call_hidden_grad(student, 50, sizes, x, y)
    empty = {name for name in expected if reply.named_after[name].info.grad is None}
    hint = (NOTHING_STORED if empty == set(expected) else
            DETACHED if empty == {n for n in expected if n.startswith("model.0.")} else "")
    for name, grad in expected.items():
        param = reply.named_after[name]
        what = f"{name}.grad after hidden_grad(model, x, y)"
        if param.info.grad is None:
            fail(f"{what} is None, but L.backward() would have filled it."
                 + (f"\nHint: {hint}" if hint else ""))
        expect_tensor(param.info.grad, grad, what, mistakes={
            "this is twice what one L.backward() gives: gradients add up in .grad. Call "
            "L.backward() once.": lambda grad=grad: 2 * grad,
            SUMMED: lambda grad=grad: grad * y.numel()})


@graded("hidden_grad", points=1, visible=True)
def test_hidden_grad_inactive_units(student):
    """with ReLU units switched off, the answer is dL/dh (after the ReLU), not dL/dz"""
    sizes, x, y = (4, 6, 3), rand(9, 4, seed=60), rand(9, 3, seed=61)
    dh, dz, _, _ = reference_hidden_grad(60, sizes, x, y, F32)
    authoring_check(bool((dz == 0).any()) and not torch.allclose(dh, dz), "some units must be off")
    check_hidden_grad(student, 60, sizes, x, y, about="a batch where some ReLU units are off")


@graded("hidden_grad", points=1)
def test_hidden_grad_float64(student):
    """float64 model and data, other sizes"""
    sizes = (5, 3, 4)
    x, y = rand(11, 5, seed=70, dtype=F64), rand(11, 4, seed=71, dtype=F64)
    check_hidden_grad(student, 70, sizes, x, y, F64, about="a float64 model and batch")


@graded("hidden_grad", points=1)
def test_hidden_grad_single_sample(student):
    """a single 1-D sample x of shape (in,)"""
    # 3 outputs: with 2, a summed loss (x2) and a second backward() (x2) would give one value
    sizes, x, y = (3, 4, 3), rand(3, seed=80), rand(3, seed=81)
    check_hidden_grad(student, 80, sizes, x, y, about="a single sample x of shape (3,)")


@graded("hidden_grad", points=1, visible=True)
def test_hidden_grad_adds_to_existing_grads(student):
    """a model whose .grad already holds a gradient: L.backward() adds to it, nothing clears it"""
    sizes, x, y = (3, 4, 2), rand(5, 3, seed=90), rand(5, 2, seed=91)
    model, _ = build("mlp_model", 90, *sizes, F32, True)
    earlier = {f"model.{n}": p.grad.clone() for n, p in model.named_parameters()}
    _, _, added, _ = reference_hidden_grad(90, sizes, x, y, F32, stale=True)
    _, _, alone, _ = reference_hidden_grad(90, sizes, x, y, F32)
    reply, _ = call_hidden_grad(student, 90, sizes, x, y, stale=True)
    got = {name: reply.named_after[name].info.grad for name in added}
    first = {n for n in added if n.startswith("model.0.")}
    unchanged = {n for n, g in got.items() if isinstance(g, torch.Tensor) and g.shape ==
                 earlier[n].shape and torch.allclose(g, earlier[n], rtol=1e-4, atol=1e-5)}
    rest_right = all(isinstance(got[n], torch.Tensor) and got[n].shape == added[n].shape
                     and torch.allclose(got[n], added[n], rtol=1e-4, atol=1e-5)
                     for n in added if n not in first)
    detached = unchanged == first and rest_right
    for name, grad in added.items():
        param = reply.named_after[name]
        what = f"{name}.grad after hidden_grad(model, x, y), when it already held a gradient"
        if param.info.grad is None:
            fail(f"{what} is None, but L.backward() adds its gradient to what .grad holds. Do not "
                 "clear the gradients (model.zero_grad(), p.grad = None), before or after.")
        expect_tensor(param.info.grad, grad, what, mistakes={
            "do not clear the gradients: .grad holds only this call's gradient, so the one it "
            "already held was thrown away (model.zero_grad() or p.grad = None). L.backward() adds "
            "to .grad, and hidden_grad must leave .grad as L.backward() would; clearing it is the "
            "training loop's job.": lambda name=name: alone[name],
            "this is twice what one L.backward() adds: call L.backward() once.":
                lambda name=name: earlier[name] + 2 * alone[name],
            **({DETACHED: lambda name=name: earlier[name]} if detached else {
                ".grad still holds only the earlier gradient: this call added nothing to the "
                "parameters' .grad. Call L.backward() on the loss (torch.autograd.grad returns "
                "gradients without storing them in .grad).":
                    lambda name=name: earlier[name]}),
            SUMMED: lambda name=name: earlier[name] + y.numel() * alone[name],
        })
