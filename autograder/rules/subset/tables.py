"""What a by-hand answer may name: the modules, builtins, attributes and torch names of the
subset, and the operator each alias of torch runs (data, read by the other parts)."""


MODULES = {
    "torch": None, "torch.nn": None, "torch.nn.functional": None, "torch.linalg": None,
    "torch.autograd": None,
    "math": "any", "itertools": "any",
    "functools": {"reduce", "partial", "lru_cache", "cache", "wraps"},
    "operator": {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
                 "eq", "ne", "lt", "le", "gt", "ge", "not_", "and_", "or_", "xor", "iadd",
                 "isub", "imul", "itruediv", "itemgetter", "index", "matmul"},
    "copy": {"copy", "deepcopy"},
    # annotations: names that describe types and compute nothing (no get_type_hints, which
    # evaluates text, no cast of a value)
    "typing": {"Optional", "Union", "Tuple", "List", "Dict", "Set", "FrozenSet", "Sequence",
               "Mapping", "Iterable", "Iterator", "Callable", "Any", "Literal", "Final",
               "TypeVar", "TYPE_CHECKING", "NamedTuple", "Protocol"},
    "__future__": {"annotations"},
    # PyTorch's own decorator for a backward written by hand ("Extending torch.autograd")
    "torch.autograd.function": {"once_differentiable", "Function", "FunctionCtx"},
}
"""Modules a by-hand answer may import: None means torch's rule (`torch_attribute`), "any" every
public name, else the names allowed."""

BUILTINS = frozenset("""
    abs all any bool dict divmod enumerate filter float int isinstance issubclass len list map max
    min pow print range reversed round set slice sorted str sum tuple zip frozenset iter next
    callable repr format chr ord complex hash id bin hex oct ascii
    None True False NotImplemented Ellipsis
    ArithmeticError AssertionError Exception IndexError KeyError LookupError NotImplementedError
    OverflowError RuntimeError StopIteration TypeError ValueError ZeroDivisionError
""".split())
"""Builtins any answer may use."""
EXCEPTIONS = frozenset(name for name, value in vars(__import__("builtins")).items()
                       if isinstance(value, type) and issubclass(value, Exception))
"""Python's exception classes (and warning categories): values to raise and catch, nothing more."""
CLASS_BUILTINS = frozenset({"staticmethod", "classmethod", "super"})
"""Builtins of class definitions, where the exercise is a class."""
REFLECTION = {
    **dict.fromkeys(("getattr", "setattr", "delattr", "hasattr", "vars", "globals", "locals",
                     "dir", "type", "object", "property", "memoryview", "super", "classmethod",
                     "staticmethod"),
                    "reflection: reaching objects and attributes by name or by their type"),
    **dict.fromkeys(("eval", "exec", "compile", "__import__", "__build_class__"),
                    "running code given as text"),
    **dict.fromkeys(("open", "input", "breakpoint", "help", "exit", "quit", "__builtins__",
                     "__loader__", "__spec__"), "the interpreter or files"),
}
"""Builtins refused, and why."""

TENSOR_META = frozenset("""
    shape dtype device ndim dim size numel nelement item tolist is_floating_point is_complex
    is_contiguous requires_grad requires_grad_ is_leaf grad data layout stride T mT H mH float
    double half int long bool to type_as cpu contiguous clone detach detach_ new_tensor
    element_size itemsize eps tiny resolution bits type
""".split())
"""A tensor's metadata and conversions (and torch.finfo's fields): allowed on any value."""
PYTHON_METHODS = frozenset("""
    append extend insert pop remove clear copy items keys values get setdefault update add
    discard union intersection difference index count sort reverse join format split strip
    startswith endswith lower upper replace real imag conjugate
""".split())
"""Methods of lists, dicts, sets, strings and numbers."""
GRAPH = frozenset({"grad_fn", "next_functions", "enable_grad", "set_grad_enabled", "graph",
                   "grad_mode", "register_hook", "register_prehook", "retain_grad"})
"""What reaches autograd's graph or turns gradient recording on: refused in every method of a
class exercise (07), whose forward could otherwise build the library's graph and hand its nodes
to the backward written by hand."""
MAX_DEPTH = 200
"""How deeply nested a checked statement may be, in levels of its syntax tree (a sum of 200
terms; an answer's deepest statement is about 15): the walk reads every level, and a deeper
statement is refused, named, rather than overflow Python's stack."""
MAX_STEPS = 200_000
"""How many steps (nodes visited, names and returned values followed, trees indexed) the check of
one function may take: about 190 times the most any of the samples and variants takes (1,068). It runs in the
grader's process, before any limit on the learner's code applies: a walk that did not end would
hang the grader."""
STORED = frozenset({"data", "grad", "requires_grad"})
"""Attributes of a tensor an answer may assign (p.data = ..., p.grad = None)."""
TORCH_VALUES = frozenset("""
    tensor as_tensor asarray Tensor Size no_grad enable_grad is_tensor is_floating_point
    finfo iinfo inf nan pi e newaxis get_default_dtype result_type promote_types
    broadcast_shapes broadcast_tensors can_cast dtype Parameter Module Function
    set_grad_enabled is_grad_enabled inference_mode
    float16 bfloat16 float32 float64 half float double int8 int16 int32 int64 uint8 bool long
    int short complex64 complex128
""".split())
"""Names of torch (and of torch.nn, torch.autograd) that are plain values or classes to test
against: allowed wherever the module is."""
ALIASES = {
    "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
    "absolute": "abs", "negative": "neg", "positive": "neg", "greater": "gt",
    "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne", "clip": "clamp",
    "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2", "arccosh": "acosh",
    "arcsinh": "asinh", "arctanh": "atanh", "swapaxes": "transpose", "swapdims": "transpose",
    "moveaxis": "movedim", "concat": "cat", "concatenate": "cat", "hstack": "cat",
    "vstack": "cat", "row_stack": "cat", "column_stack": "cat", "dstack": "cat",
    "ravel": "reshape", "reshape_as": "reshape", "sum_to_size": "sum", "square": "pow",
    "vector_norm": "linalg_vector_norm", "expand_dims": "unsqueeze", "dsplit": "split",
    "hsplit": "split", "vsplit": "split", "tensor_split": "split", "atleast_1d": "reshape",
    "atleast_2d": "reshape", "fliplr": "flip", "flipud": "flip", "trapz": "sum",
    "mean": "mean", "fill": "fill_", "zero": "zero_", "new_empty": "new_empty",
    "floor_divide": "floor_divide", "rsub": "rsub", "sigmoid": "sigmoid", "expit": "sigmoid",
    "mse_loss": "mse_loss", "positive_": "neg", "outer": "mul", "ger": "mul", "kron": "mul",
}
"""A Python name -> the operator it runs, where the two differ."""
PRODUCT_NAMES = frozenset({
    "matmul", "__matmul__", "mm", "bmm", "einsum", "tensordot", "addmm", "inner", "dot", "vdot",
    "linear", "mv", "addmv", "baddbmm", "addbmm", "chain_matmul", "multi_dot", "vecdot"})
"""Names that compute a matrix product: allowed where the library's products are ("mm")."""


UNSAFE_TORCH = frozenset({"library", "ops", "utils", "overrides", "func", "fx", "jit", "compile",
                          "multiprocessing", "distributed", "hub", "package", "classes",
                          "serialization", "export", "onnx"})
"""Parts of torch that register operators, run code or reach processes: refused even where any
torch function is allowed (a class's methods other than the by-hand one)."""
