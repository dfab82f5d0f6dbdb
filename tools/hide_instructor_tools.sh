#!/usr/bin/env bash
# Hide nbgrader's instructor tools from learners' JupyterLab: the Formgrader (menu, panel and its
# server side) and the Create Assignment sidebar. Validate, the Assignment List and the Course List
# stay. Run it with the learners' environment active (their venv, conda env or image):
#     bash tools/hide_instructor_tools.sh              # for every user of this environment
#     bash tools/hide_instructor_tools.sh user         # only for the current user
set -euo pipefail
level=${1:-sys_prefix}
case $level in sys_prefix|user) ;; *) echo "usage: $0 [sys_prefix|user]" >&2; exit 2 ;; esac
plugins=(@jupyter/nbgrader:formgrader @jupyter/nbgrader:create-assignment)
jupyter labextension disable --level="$level" "${plugins[@]}"
# locked: JupyterLab's plugin manager cannot turn them back on
jupyter labextension lock --level="$level" "${plugins[@]}"
# The formgrader's server extension. (`jupyter server extension disable` refuses this module, as
# it has no extension points of its own, so the setting is written the way that command would.)
python - "$level" <<'PY'
import json, os, sys
from jupyter_core.paths import jupyter_config_dir
folder = jupyter_config_dir() if sys.argv[1] == "user" else os.path.join(sys.prefix, "etc", "jupyter")
path = os.path.join(folder, "jupyter_server_config.json")
config = json.load(open(path)) if os.path.exists(path) else {}
config.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})[
    "nbgrader.server_extensions.formgrader"] = False
os.makedirs(folder, exist_ok=True)
with open(path, "w") as f:
    json.dump(config, f, indent=2)
print(f"formgrader server extension disabled in {path}")
PY
