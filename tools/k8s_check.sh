#!/bin/bash
# `make k8s-check`: the Kubernetes manifests in docs/batch.md (its ```yaml blocks) against the
# Kubernetes API's JSON schemas, strictly (an unknown field fails), with kubernetes-validate, which
# bundles the schemas and so works offline. Also runs the grading Job's shell command with `echo`
# for python, for every completion index, to check the shares it asks for are 1/N .. N/N.
# No cluster is involved: what a real cluster does with the Job is untested.
# Usage: tools/k8s_check.sh [VENV]   (VENV gets kubernetes-validate when it lacks it)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/.venv/k8s-validate}
# Oldest Kubernetes whose Job takes every field used (backoffLimitPerIndex: beta, on by default,
# from 1.29), and the newest the tool knows.
OLDEST=${K8S_OLDEST:-1.29}

if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet kubernetes-validate
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

"$VENV/bin/python" - "$ROOT/docs/batch.md" "$T" <<'EOF'
import re, subprocess, sys
from pathlib import Path

import yaml

doc, out = Path(sys.argv[1]).read_text(), Path(sys.argv[2])
blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
assert blocks, "docs/batch.md has no ```yaml block"
for i, block in enumerate(blocks):
    (out / f"manifest{i + 1}.yaml").write_text(block)
    job = yaml.safe_load(block)
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        continue
    n = spec["completions"]
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c"], container["command"]
    shares = []
    for index in range(n):
        shell = "python() { echo \"$@\"; }; " + container["args"][0]
        line = subprocess.run(["sh", "-c", shell], env={"JOB_COMPLETION_INDEX": str(index)},
                              capture_output=True, text=True, check=True).stdout.split()
        shares.append(line[line.index("--shard") + 1])
    assert shares == [f"{k}/{n}" for k in range(1, n + 1)], shares
    print(f"k8s-check: {job['metadata']['name']}: completion indexes 0..{n - 1} grade shares "
          f"{shares[0]} .. {shares[-1]}")
EOF
for version in "$OLDEST" latest; do
  if [ "$version" = latest ]; then
    "$VENV/bin/kubernetes-validate" --strict "$T"/*.yaml
  else
    "$VENV/bin/kubernetes-validate" --strict -k "$version" "$T"/*.yaml
  fi
done
echo "k8s-check: OK (schemas only; no cluster ran the Jobs)"
