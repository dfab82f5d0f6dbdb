"""Which answers to one exercise are alike: copydetect's winnowing, one class at a time.

Each answer becomes one character per token (`filter_code`): every name the answer binds is the
same character, so renaming hides nothing; comments and layout are gone; keywords, operators,
attribute names (`.sum`, `.grad`) and the modules and functions it uses keep characters of their
own. copydetect (MOSS's winnowing, Schleimer, Wilkerson and Aiken 2003) then does the rest: it
picks the fingerprints of runs of K tokens that winnowing keeps (`Fingerprint`, a CodeFingerprint
with a hash that is the same in every process), compares two answers' fingerprints, and gives the
shared runs and, for each answer, the share of its fingerprinted code the other also holds; the
shared runs are mapped back onto the code (the regions the page marks).

Not counted as shared: every run of the release notebook's answer cell (the signature, the
docstring, `raise NotImplementedError()`), and every run that more than COMMON of the class's
answers hold (code every answer must contain). Runs the worked solution also holds, or other
learners also hold, weigh less in the weight that orders the pairs, so that the same unusual code
(a shared mistake) ranks above the same expected code.

Comparing every pair of 300 answers is 44,850 comparisons per exercise; instead the fingerprints of
all answers go in one answers x fingerprints matrix, whose product with itself counts the shared
fingerprints of every pair at once, and copydetect compares only the pairs that share at least
CANDIDATE of the smaller answer's fingerprints.
"""

from __future__ import annotations

import ast
import io
import tokenize
import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage, winnow

from autograder.similarity.answers import Answer, parsed

K = 10
"""Tokens in one fingerprinted run (copydetect's noise threshold, in characters of the filtered
code, which here has one character per token)."""
K_TEXT = 25
"""Characters in one fingerprinted run of a written answer."""
WINDOW = 4
"""Winnowing window: every shared run of K + WINDOW - 1 tokens is found."""
THRESHOLD = 0.45
"""Similarity from which a pair is reported (bench/similarity.py measures it: every disguised copy
is above, a few per cent of independent pairs are)."""
CANDIDATE = 0.3
"""Share of the smaller answer's fingerprints two answers must share to be compared closely."""
COMMON = 0.7
"""A run that more than this share of the class's answers hold is what every answer contains."""
COMMON_MIN = 4
"""... and at least this many answers (in a small class, two learners are not "every answer")."""
SOLUTION_WEIGHT = 0.5
"""Weight, in the order of the pairs, of shared code that the worked solution also holds."""
RIGHT_WEIGHT = 0.6
"""Factor of a pair's weight when both answers passed all their hidden tests (when the grader's
results are known): the same right answer is expected more often than the same mistake."""

@dataclass
class Print:
    """One answer's fingerprints."""

    answer: Answer
    fingerprint: CodeFingerprint


@dataclass
class Pair:
    """Two answers to one exercise that are alike."""

    a: Answer
    b: Answer
    similarity: float
    """The mean of the shares of each answer's code that the other also holds (copydetect's
    similarity of each; the mean, so that a copy padded with as much code again still shows)."""
    weight: float
    """`similarity`, with the code the worked solution also holds counted at SOLUTION_WEIGHT: what
    orders the pairs."""
    slices_a: list = field(default_factory=list)
    """(start, end) character ranges of a.text that b also holds."""
    slices_b: list = field(default_factory=list)
    expected: float = 0.0
    """Share of the shared fingerprints that the worked solution also holds."""
    shares: tuple[float, float] = (0.0, 0.0)
    """copydetect's share of each answer (a, b) that the other also holds."""


@dataclass
class Group:
    """Every answer to one exercise (graded function or written answer) in the class."""

    assignment: str
    item: str
    kind: str
    answers: list[Answer]
    short: list[Answer]
    """Answers too short to tell apart (listed, never compared)."""
    pairs: list[Pair] = field(default_factory=list)
    """Pairs at or above the threshold, the highest weight first."""
    clusters: list[list[str]] = field(default_factory=list)
    """Learners linked by reported pairs, when more than two are."""
    common: int = 0
    """Fingerprints left out as what every answer contains."""
    filtered: dict = field(default_factory=dict)
    """student -> `filter_code` of their answer, when computed already."""


def normal_text(text: str) -> str:
    """A written answer as compared: lower case, each run of white space one space."""
    return " ".join(text.lower().split())


def bound_names(text: str) -> set[str]:
    """The names the code itself binds (parameters, variables, loop targets, its own functions
    and classes): the learner chose them, so a copy may rename them."""
    tree = parsed(text)
    if tree is None:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


_LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENDMARKER, tokenize.ENCODING}


def _symbol(text: str) -> str:
    """One character standing for a token (the same in every process)."""
    return chr(0xE000 + zlib.crc32(text.encode("utf-8", "replace")) % 6000)


@dataclass(frozen=True)
class Filtered:
    """Code as one character per token, and where each token is in the code."""

    text: str
    starts: np.ndarray
    """Character offset in the code where the token of each character of `text` starts."""
    ends: np.ndarray


def _tokens(text: str) -> list[tuple[int, str, int, int]]:
    """(kind, string, start, end) of every token but comments and layout, start and end as
    character offsets: Python's tokenizer, or Pygments' lexer for code it cannot read."""
    lines = io.StringIO(text).readlines()  # as the tokenizer reads them
    first = [0]
    for line in lines:
        first.append(first[-1] + len(line))
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            if t.type in _LAYOUT:
                continue
            kind = "string" if t.type == tokenize.STRING or t.type in _FSTRING else \
                "name" if t.type == tokenize.NAME else "other"
            out.append((kind, t.string, first[t.start[0] - 1] + t.start[1],
                        first[t.end[0] - 1] + t.end[1]))
        return out
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError, IndexError):
        pass
    from pygments import token
    from pygments.lexers import PythonLexer
    out, at = [], 0
    for kind, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens(text):
        if not (kind in token.Text or kind in token.Comment):
            name = "string" if kind in token.Literal.String else \
                "name" if kind in token.Name else "other"
            out.append((name, value, at, at + len(value)))
        at += len(value)
    return out


_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
            if hasattr(tokenize, n)}


def filter_code(text: str) -> Filtered:
    """Python code as one character per token: a name the code binds is "V" (renaming hides
    nothing), a string "S"; every other token (keywords, operators, numbers, attribute names, the
    names of modules and functions the code uses but does not define) its own character;
    comments and layout nothing. (copydetect's own filter spells keywords out and makes every
    name, `.sum` and `torch` too, one "V", which makes independent answers of the same shape
    alike.)"""
    bound = bound_names(text)
    chars, starts, ends = [], [], []
    previous, in_string = "", False
    for kind, value, start, end in _tokens(text):
        if kind == "string":
            if in_string:  # one "S" for a string's parts, and for implicitly joined strings
                ends[-1] = end
                continue
            symbol, in_string = "S", True
        else:
            in_string = False
            symbol = "V" if kind == "name" and previous != "." and value in bound \
                else _symbol(value)
        chars.append(symbol)
        starts.append(start)
        ends.append(end)
        previous = value
    return Filtered("".join(chars), np.array(starts, dtype=np.int64),
                    np.array(ends, dtype=np.int64))


def kgram_hashes(text: str, k: int) -> np.ndarray:
    """The hash of every run of k characters of `text`, the same in every process (copydetect's
    own uses Python's `hash`, which changes with each interpreter start, and so would the
    fingerprints winnowing keeps and the similarities)."""
    if len(text) < k:
        return np.zeros(0, dtype=np.int64)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    hashes = np.zeros(len(codes) - k + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            hashes = hashes * np.uint64(1_000_003) + codes[j:len(codes) - k + 1 + j]
    return hashes.view(np.int64)


class Fingerprint(CodeFingerprint):
    """copydetect's CodeFingerprint of a text already filtered (`filter_code`), with
    `kgram_hashes`; copydetect's winnowing picks the fingerprints."""

    def __init__(self, raw: str, filtered: str, k: int, window: int,
                 positions: Filtered | None = None):
        hashes, idx = winnow(kgram_hashes(filtered, k), window, remove_duplicates=False)
        hash_idx: dict[int, list[int]] = {}
        for h, i in zip(hashes.tolist(), idx.tolist()):
            hash_idx.setdefault(h, []).append(i)
        self.filename = "answer"
        # copydetect maps shared runs back with `offsets`; here `positions` does, exactly
        self.raw_code, self.filtered_code, self.offsets = raw, filtered, np.array([])
        self.positions = positions
        self.hashes, self.hash_idx, self.k = set(hash_idx), hash_idx, k
        self.token_coverage = get_token_coverage(hash_idx, k, len(filtered))


def fingerprint(text: str, kind: str, filtered: Filtered | None = None) -> Fingerprint:
    """The fingerprints of one answer (code: one character per token, `filter_code`, which may
    be given, computed elsewhere; a written answer: its characters, `normal_text`)."""
    if kind != "code":
        return Fingerprint(text, text, K_TEXT, WINDOW)
    filtered = filter_code(text) if filtered is None else filtered
    return Fingerprint(text, filtered.text, K, WINDOW, filtered)


def all_runs(text: str, kind: str) -> set:
    """Every run's hash (no winnowing): what may not count as shared (the release's stub)."""
    filtered = filter_code(text).text if kind == "code" else text
    return set(kgram_hashes(filtered, K if kind == "code" else K_TEXT).tolist())


def _remove(fp: CodeFingerprint, hashes: set) -> None:
    gone = fp.hashes & hashes
    if gone:
        fp.hashes = fp.hashes - gone
        for h in gone:
            fp.hash_idx.pop(h, None)
        fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code))


def compare_group(group: Group, stub: str = "", solution: str = "",
                  threshold: float = THRESHOLD) -> Group:
    """Fill `group.pairs` and `group.clusters` from its answers."""
    kind = group.kind
    prints = [Print(a, fingerprint(a.text if kind == "code" else normal_text(a.text), kind,
                                   group.filtered.get(a.student)))
              for a in group.answers]
    boiler = all_runs(stub if kind == "code" else normal_text(stub), kind)
    expected = all_runs(solution if kind == "code" else normal_text(solution), kind)
    for p in prints:
        _remove(p.fingerprint, boiler)
    n = len(prints)
    if n < 2:
        return group
    # how many answers hold each run (anywhere, not only where winnowing picked it)
    k = prints[0].fingerprint.k
    held: Counter = Counter()
    for p in prints:
        held.update(set(kgram_hashes(p.fingerprint.filtered_code, k).tolist()))
    common = {h for h, c in held.items() if c > max(COMMON * n, COMMON_MIN - 0.5)}
    group.common = len(common)
    for p in prints:
        _remove(p.fingerprint, common)
    # how much a shared fingerprint weighs: less when the solution holds it, less when more of
    # the class holds it (1 when only the pair does, down to 0.1 toward COMMON of the class)
    scale = np.log(max(COMMON * n, 3) / 2)
    weights = {}
    for p in prints:
        for h in p.fingerprint.hashes:
            if h not in weights:
                rarity = min(1.0, max(0.1, 1 - np.log(max(held[h], 2) / 2) / scale))
                weights[h] = rarity * (SOLUTION_WEIGHT if h in expected else 1.0)
    # the matrix: answers x fingerprints (1 where the answer holds it)
    index: dict[int, int] = {}
    rows, cols = [], []
    for i, p in enumerate(prints):
        for h in p.fingerprint.hashes:
            rows.append(i)
            cols.append(index.setdefault(h, len(index)))
    matrix = np.zeros((n, max(1, len(index))), dtype=np.float32)
    matrix[rows, cols] = 1
    sizes = matrix.sum(axis=1)
    shared = matrix @ matrix.T
    smaller = np.minimum.outer(sizes, sizes)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(smaller > 0, shared / np.maximum(smaller, 1), 0)
    candidates = np.argwhere(np.triu(share >= CANDIDATE, k=1))
    pairs = []
    for i, j in candidates:
        pair = compare(prints[i], prints[j], expected, weights)
        if pair is not None and pair.similarity >= threshold:
            pairs.append(pair)
    pairs.sort(key=lambda p: (-p.weight, -p.similarity, p.a.student, p.b.student))
    group.pairs = pairs
    group.clusters = clusters(pairs)
    return group


def compare(x: Print, y: Print, expected: set = frozenset(),
            weights: dict | None = None) -> Pair | None:
    """copydetect's comparison of two answers, as a Pair (None if they share nothing).
    `weights`: fingerprint -> how much it weighs (1 when not there)."""
    fx, fy = x.fingerprint, y.fingerprint
    if not fx.hashes or not fy.hashes:
        return None
    overlap, (sx, sy), (slices_x, slices_y) = compare_files(fx, fy)
    if not overlap:
        return None
    similarity = float(sx + sy) / 2
    both = fx.hashes & fy.hashes
    solution = len(both & expected) / len(both) if both else 0.0
    if weights is None:
        weight = similarity * (1 - (1 - SOLUTION_WEIGHT) * solution)
    else:
        weight = similarity * sum(weights.get(h, 1.0) for h in both) / len(both)
    if x.answer.right and y.answer.right:
        weight *= RIGHT_WEIGHT
    return Pair(x.answer, y.answer, min(similarity, 1.0), float(min(weight, 1.0)),
                _ranges(slices_x, fx.positions), _ranges(slices_y, fy.positions), solution,
                (float(sx), float(sy)))


def _ranges(slices, positions: Filtered | None) -> list[tuple[int, int]]:
    """copydetect's slices (of the filtered text) as character ranges of the answer's text."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return []
    out = []
    for start, end in zip(slices[0].tolist(), slices[1].tolist()):
        if positions is None:
            out.append((int(start), int(end)))
        elif end > start and len(positions.starts):
            last = min(int(end), len(positions.ends)) - 1
            out.append((int(positions.starts[min(int(start), last)]), int(positions.ends[last])))
    return out


def clusters(pairs: list[Pair]) -> list[list[str]]:
    """Learners linked by the pairs (connected components), those of more than two learners."""
    parent: dict[str, str] = {}

    def find(s):
        parent.setdefault(s, s)
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for p in pairs:
        parent[find(p.a.student)] = find(p.b.student)
    members: dict[str, list[str]] = {}
    for s in parent:
        members.setdefault(find(s), []).append(s)
    return sorted((sorted(m) for m in members.values() if len(m) > 2), key=lambda m: (-len(m), m))
