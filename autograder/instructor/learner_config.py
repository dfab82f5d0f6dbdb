"""`python -m autograder learner-config`: the one file a learner needs to reach the exchange.

nbgrader finds the exchange and the course only through its config (`c.Exchange.root`,
`c.CourseDirectory.course_id`); it never reads NBGRADER_EXCHANGE, which only this course's own
`nbgrader_config.py` reads, and learners do not get this repository. This writes a
`nbgrader_config.py` holding those two settings and nothing else, for learners to put in the
folder they start JupyterLab in (or in ~/.jupyter/).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path, PurePosixPath

from autograder.course import ROOT

COURSE_CONFIG = ROOT / "nbgrader_config.py"
NAME = "nbgrader_config.py"

TEMPLATE = """\
# nbgrader settings for a learner of the course {course_id} (written by
# `python -m autograder learner-config`): where JupyterLab's Assignment List, `nbgrader fetch_assignment`
# and `nbgrader submit` find the course's assignments. Put this file in the folder you start
# `jupyter lab` in, or in your ~/.jupyter/ folder.
c = get_config()  # noqa: F821 - provided by nbgrader
c.Exchange.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
"""


def course_id_of(config: Path = COURSE_CONFIG) -> str:
    """The course id the course's nbgrader_config.py sets (read as nbgrader reads it)."""
    from traitlets.config.loader import PyFileConfigLoader
    loaded = PyFileConfigLoader(config.name, path=str(config.parent)).load_config()
    course_id = loaded.CourseDirectory.get("course_id")
    if not course_id:
        raise ValueError(f"{config} sets no c.CourseDirectory.course_id: pass --course-id")
    return course_id


def render(exchange: str, course_id: str) -> str:
    """The learner's nbgrader_config.py; ValueError if nbgrader would not accept the values."""
    if not PurePosixPath(exchange).is_absolute():
        raise ValueError(f"--exchange {exchange!r}: give the exchange's absolute path on the "
                         "learners' machine (e.g. /srv/nbgrader/exchange)")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", course_id):
        raise ValueError(f"course id {course_id!r}: nbgrader makes it a folder of the exchange; "
                         "use letters, digits, '.', '_' and '-'")
    return TEMPLATE.format(root=exchange, course_id=course_id)


def write(exchange: str, out: Path, course_id: str | None = None, force: bool = False) -> Path:
    path = Path(out) / NAME
    if path.resolve() == COURSE_CONFIG.resolve():
        raise ValueError(f"{path} is the course's own config: choose another --out folder")
    if path.exists() and not force:
        raise ValueError(f"{path} exists: pass --force to replace it")
    text = render(exchange, course_id or course_id_of())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def main(exchange: str, out: Path, course_id: str | None, force: bool) -> int:
    try:
        path = write(exchange, out, course_id, force)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    print(f"wrote {path} (exchange {config.Exchange.root}, course {config.CourseDirectory.course_id}): "
          "learners put it in the folder they start `jupyter lab` in, or in ~/.jupyter/")
    if not Path(exchange).is_dir():
        print(f"note: {exchange} does not exist on this machine: on the learners' server, create it "
              "world-writable (mkdir -p, chmod 777) and release assignments into it", file=sys.stderr)
    return 0
