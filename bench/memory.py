#!/usr/bin/env python
"""Peak memory of the grader (`python -m autograder grade NOTEBOOK`) on notebooks just under each
limit on what it reads (notebook.MAX_BYTES, MAX_CONTAINERS, MAX_NOTEBOOK_CODE), and on the
worked solution. The learner's code runs in the jail (its own limits); this is the grader's own
process, the one every other learner's grade goes through.

    python bench/memory.py            # prints one line per notebook: peak resident memory
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from autograder.grade import submission as notebook  # noqa: E402
from autograder.course import ASSIGNMENTS  # noqa: E402

A = ASSIGNMENTS["01_linear_algebra"]


def solution() -> dict:
    return json.loads((ROOT / "solutions" / A.id / A.notebook).read_text())


def padded(make_output) -> bytes:
    """The solution with one output cell holding what `make_output(room)` makes of the room left."""
    nb = solution()
    base = len(json.dumps(nb).encode())
    nb["cells"][-1].setdefault("outputs", []).append(make_output(notebook.MAX_BYTES - base - 1000))
    return json.dumps(nb, ensure_ascii=False).encode()


def cases() -> dict[str, bytes]:
    code = solution()
    used = sum(len("".join(c["source"])) for c in code["cells"] if c["cell_type"] == "code")
    filler = "x = 1\n" * ((notebook.MAX_NOTEBOOK_CODE - used - 100) // 6 // 5)
    for _ in range(5):
        code["cells"].append({"cell_type": "code", "metadata": {}, "source": filler,
                              "outputs": [], "execution_count": None})
    lists = notebook.MAX_CONTAINERS - 5_000
    return {
        "worked solution": json.dumps(solution()).encode(),
        f"{notebook.MAX_BYTES >> 20} MB of ASCII output": padded(
            lambda room: {"output_type": "stream", "name": "stdout", "text": "x" * room}),
        f"{notebook.MAX_BYTES >> 20} MB of 4-byte characters": padded(
            lambda room: {"output_type": "stream", "name": "stdout", "text": "\U0001F600" * (room // 4)}),
        f"{lists:,} empty lists in metadata": padded(
            lambda room: {"output_type": "display_data", "data": {}, "metadata": {"x": [[]] * lists}}),
        f"{notebook.MAX_NOTEBOOK_CODE:,} characters of code": json.dumps(code).encode(),
    }


def peak(path: Path, out: Path) -> tuple[int, int]:
    """(exit status, peak resident kB) of the grader on `path`."""
    process = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(path),
                                "--json", str(out)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss


def main() -> None:
    print(f"Peak resident memory of `python -m autograder grade` (one notebook of {A.id}):")
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in cases().items():
            path = Path(tmp) / "submission.ipynb"
            path.write_bytes(content)
            code, kb = peak(path, Path(tmp) / "results.json")
            print(f"  {name:40s} {len(content) / 2**20:7.1f} MB file  exit {code}  "
                  f"peak {kb / 2**20:5.2f} GB")
            path.unlink()


if __name__ == "__main__":
    main()
