#!/bin/bash
# `make slurm-check`: grade a class of sample submissions on a real one-node Slurm cluster, with
# the job array and finish step docs/batch.md prescribes, and check the merged results equal one
# `python -m autograder grade submitted --out single` run on this machine.
#
# As root: installs slurm-wlm and munge with apt-get when missing, starts munged, slurmctld and
# slurmd on localhost from a slurm.conf in a temporary folder (own ports, own munge socket, state
# and spool in that folder), submits, waits, compares, and on exit (also on failure or Ctrl-C)
# cancels its jobs, stops the daemons it started and removes the temporary folder.
# Prints the wall time of each shard and of the whole array + finish step. Exit status 0 only when
# every job succeeded and every result matches. Minutes, so not part of `make test`.
#
# Environment: SHARDS (4), STUDENTS (12, each with ASSIGNMENTS' notebooks),
# ASSIGNMENTS ("01_linear_algebra 02_activation_functions 03_chain_rule"), KEEP=1 keeps the
# temporary folder (logs, results) for a look afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
SHARDS=${SHARDS:-4}
STUDENTS=${STUDENTS:-12}
ASSIGNMENTS=${ASSIGNMENTS:-01_linear_algebra 02_activation_functions 03_chain_rule}

say() { printf 'slurm-check: %s\n' "$*"; }
die() { printf 'slurm-check: FAIL: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts slurmd, which runs jobs as their user)"
[ -x "$PY" ] || die "$PY missing: run make setup first"

# --- install ------------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || die "Slurm is missing and there is no apt-get: install slurm-wlm and munge"
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || \
    { apt-get update -q >/dev/null && apt-get install -y -q slurm-wlm munge >/dev/null; }
fi
say "$(slurmd -V), $(munged --version 2>&1 | head -1)"

# --- cleanup, whatever happens ------------------------------------------------------------------
T=$(mktemp -d /tmp/slurm-check.XXXXXX)
chmod 755 "$T"
DAEMONS=()   # pids of munged, slurmctld, slurmd (started in the foreground with &)
JOBS=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  set +e +o pipefail   # a failing step here must not skip the next ones
  if [ ${#JOBS[@]} -gt 0 ] && [ -f "$T/slurm.conf" ]; then
    # Cancel, and wait (30 s at most) until slurmd has ended the jobs' processes.
    export SLURM_CONF=$T/slurm.conf
    scancel "${JOBS[@]}" 2>/dev/null || true
    for _ in $(seq 60); do
      [ -z "$(squeue -h -t all -j "$(IFS=,; echo "${JOBS[*]}")" -o %T 2>/dev/null \
              | grep -Ev 'COMPLETED|CANCELLED|FAILED|TIMEOUT|PREEMPTED|NODE_FAIL|OUT_OF_MEMORY')" ] && break
      sleep 0.5
    done
    pids=$(scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }')
    [ -z "$pids" ] || { say "killing job processes left: $pids"; kill -9 $pids 2>/dev/null || true; }
  fi
  # slurmd first (it ends its job steps), then slurmctld, then munged.
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    kill "${DAEMONS[i]}" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "${DAEMONS[i]}" 2>/dev/null || break; sleep 0.1; done
    kill -9 "${DAEMONS[i]}" 2>/dev/null || true
    wait "${DAEMONS[i]}" 2>/dev/null || true
  done
  if [ "${KEEP:-0}" = 1 ]; then say "kept $T"; else rm -rf "$T"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- munge: its own key and socket --------------------------------------------------------------
mkdir -m 711 "$T/munge"
if command -v mungekey >/dev/null; then
  mungekey --create --keyfile="$T/munge/munge.key"
else
  dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$T/munge/munge.key"
munged --foreground --force --socket="$T/munge/munge.socket" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
  --seed-file="$T/munge/munged.seed" >"$T/munge/munged.out" 2>&1 &
DAEMONS+=($!)
for _ in $(seq 50); do [ -S "$T/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$T/munge/munge.socket" ] || die "munged did not start: $(cat "$T/munge/munged.log" 2>/dev/null)"

# --- slurm.conf for one node on localhost ------------------------------------------------------
HOST=$(hostname -s)
# The node as slurmd sees it (CPUs, sockets, cores, threads, memory).
NODE=$(slurmd -C | head -1 | sed "s/^NodeName=[^ ]*/NodeName=$HOST/")
mkdir -p "$T/state" "$T/spool" "$T/log"
cat > "$T/slurm.conf" <<EOF
ClusterName=gradecheck
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=3600
$NODE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=check Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
say "node: $NODE"

slurmctld -D -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
DAEMONS+=($!)
slurmd -D -f "$SLURM_CONF" -N "$HOST" >"$T/log/slurmd.out" 2>&1 &
DAEMONS+=($!)

for i in $(seq 120); do
  state=$(sinfo -h -N -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  [ "$i" = 120 ] && die "the node is not idle after 60 s (sinfo: '$state'): $(tail -5 "$T/log/slurmctld.log" "$T/log/slurmd.log" 2>&1)"
  sleep 0.5
done
say "node $HOST idle"

# --- the class -----------------------------------------------------------------------------------
COURSE=$T/course   # stands for /shared/course: .venv/ and submitted/
mkdir -p "$COURSE"
ln -s "$(cd "$(dirname "$PY")/.." && pwd)" "$COURSE/.venv"
"$PY" - "$COURSE/submitted" "$STUDENTS" $ASSIGNMENTS <<'EOF'
"""Students student-01..NN, each with a notebook per assignment, taking the samples in turn."""
import sys
from pathlib import Path

import nbformat

from autograder.course import ASSIGNMENTS
from autograder.instructor.samples import load_scenarios, submission_notebook

dest, students, assignments = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for k, assignment in enumerate(assignments):
    scenarios = load_scenarios(assignment)
    for i in range(students):
        scenario = scenarios[(i * (k + 2)) % len(scenarios)]
        out = dest / f"student-{i + 1:02d}" / assignment / ASSIGNMENTS[assignment].notebook
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(submission_notebook(scenario), out)
EOF
NOTEBOOKS=$(find "$COURSE/submitted" -name '*.ipynb' | wc -l)
say "$NOTEBOOKS notebooks ($STUDENTS students x $(echo $ASSIGNMENTS | wc -w) assignments) in $COURSE/submitted"

# --- the job array and finish step, as docs/batch.md prescribes ---------------------------------
# grade.sbatch is the doc's own block (the one that starts with '#!/bin/bash' and '# grade.sbatch');
# the submission is the doc's block that starts with 'cd /shared/course', with N and the folder
# replaced. Only the resources change, with sbatch options (which beat #SBATCH lines): 1 CPU a
# task and a memory request this node has.
"$PY" - "$ROOT/docs/batch.md" "$COURSE" <<'EOF'
import re, sys
from pathlib import Path

doc, course = Path(sys.argv[1]).read_text(), Path(sys.argv[2])
blocks = re.findall(r"```bash\n(.*?)```", doc, re.S)
script = [b for b in blocks if b.startswith("#!/bin/bash\n# grade.sbatch")]
submit = [b for b in blocks if b.startswith("cd /shared/course")]
assert len(script) == 1 and len(submit) == 1, "docs/batch.md: no single grade.sbatch or submit block"
(course / "grade.sbatch").write_text(script[0])
(course / "submit.sh").write_text(submit[0])
EOF
sed -i -e "s|^cd /shared/course|cd $COURSE|" -e "s|^N=[0-9]*|N=$SHARDS|" "$COURSE/submit.sh"
grep -q "^N=$SHARDS" "$COURSE/submit.sh" || die "docs/batch.md's submit block sets no N="
echo 'echo "$array $finish"' >> "$COURSE/submit.sh"

MEM_MB=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE")
sed -i "s|\bsbatch --parsable|sbatch --parsable --cpus-per-task=1 --mem=$(( MEM_MB / SHARDS ))M|" "$COURSE/submit.sh"
[ "$(grep -c -- '--cpus-per-task=1' "$COURSE/submit.sh")" = 2 ] || die "docs/batch.md's submit block: expected two 'sbatch --parsable' commands"
sed 's/^/    /' "$COURSE/submit.sh"

say "submitting $SHARDS shards + finish step"
start=$(date +%s.%N)
read -r ARRAY FINISH < <(cd "$COURSE" && bash submit.sh)
[ -n "$FINISH" ] || die "submitting failed (array '$ARRAY', finish '$FINISH')"
JOBS=("$ARRAY" "$FINISH")
say "array job $ARRAY, finish job $FINISH"

while [ -n "$(squeue -h -j "$ARRAY,$FINISH" -o %i 2>/dev/null)" ]; do sleep 1; done
end=$(date +%s.%N)

# Every task and the finish step: COMPLETED with exit code 0; wall time of each.
failed=0
secs() { date -d "$1" +%s; }
while read -r line; do
  id=$(grep -o 'JobId=[0-9]*' <<<"$line" | cut -d= -f2)
  task=$(grep -o 'ArrayTaskId=[0-9]*' <<<"$line" | cut -d= -f2 || true)
  state=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2)
  code=$(grep -o ' ExitCode=[0-9:]*' <<<"$line" | cut -d= -f2)
  t0=$(grep -o 'StartTime=[0-9T:-]*' <<<"$line" | cut -d= -f2)
  t1=$(grep -o 'EndTime=[0-9T:-]*' <<<"$line" | cut -d= -f2)
  name=${task:+shard $task/$SHARDS}; name=${name:-finish step}
  say "$name: $state exit $code, wall $(( $(secs "$t1") - $(secs "$t0") )) s ($t0 .. $t1)"
  if [ "$state" != COMPLETED ] || [ "$code" != 0:0 ]; then failed=1; fi
done < <(scontrol -o show job "$ARRAY"; scontrol -o show job "$FINISH")
say "array + finish step: $(elapsed "$start" "$end") s from submission to the end"
for f in "$COURSE"/slurm-*.out; do
  # The last state of tqdm's progress bar (\r-separated) and every other line.
  [ -s "$f" ] && { say "$(basename "$f"):"; sed -e 's/.*\r//' -e 's/^/    /' "$f"; }
done
[ "$failed" = 0 ] || die "a job did not complete (logs: $T/log, KEEP=1 keeps them)"
# The shares did all the work: the finish step found every result current.
grep -q '^graded 0 notebooks' "$COURSE/slurm-$FINISH.out" \
  || die "the finish step graded notebooks the shards should have: $(cat "$COURSE/slurm-$FINISH.out")"

# --- one run on one machine, and the comparison --------------------------------------------------
say "one run: python -m autograder grade submitted --out single"
t0=$(date +%s.%N)
(cd "$COURSE" && "$PY" -m autograder grade submitted --out single --quiet)
say "one run: $(elapsed "$t0" "$(date +%s.%N)") s"

"$PY" - "$COURSE/feedback_json" "$COURSE/single" "$SHARDS" <<'EOF'
"""The merged results equal the single run's: the same files, the same grades.csv, and each
file the same but for the timing and the run id."""
import csv, json, sys
from pathlib import Path

merged, single, shards = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])

def results(folder: Path) -> dict[str, dict]:
    found = {}
    for path in sorted(folder.glob("*/*.json")):
        data = json.loads(path.read_text())
        data.pop("execution_time", None)
        for key in ("run", "seconds"):
            data.get("extra_data", {}).pop(key, None)
        found[str(path.relative_to(folder))] = data
    return found

def rows(folder: Path) -> list[dict]:
    with open(folder / "grades.csv", newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: (r["student"], r["assignment"]))

a, b = results(merged), results(single)
problems = []
if a.keys() != b.keys():
    problems.append(f"result files differ: only merged {sorted(a.keys() - b.keys())}, "
                    f"only single {sorted(b.keys() - a.keys())}")
for name in sorted(a.keys() & b.keys()):
    if a[name] != b[name]:
        ta = {t.get("name"): t.get("score") for t in a[name].get("tests", [])}
        tb = {t.get("name"): t.get("score") for t in b[name].get("tests", [])}
        diff = {n: (ta.get(n), tb.get(n)) for n in ta.keys() | tb.keys() if ta.get(n) != tb.get(n)}
        problems.append(f"{name}: differs (score {a[name].get('score')} vs {b[name].get('score')}; "
                        f"tests merged vs single: {diff or 'same scores, other fields'})")
if rows(merged) != rows(single):
    problems.append("grades.csv differs")
runs = {json.loads(p.read_text())["extra_data"]["run"] for p in merged.glob("*/*.json")}
tests = sum(len(d.get("tests", [])) for d in a.values())
print(f"slurm-check: {len(a)} result files, {tests} test results, {len(rows(merged))} rows of "
      f"grades.csv compared; written by {len(runs)} runs (shards {shards})")
for p in problems:
    print(f"slurm-check: MISMATCH {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
say "OK: the merged shards equal one run"
