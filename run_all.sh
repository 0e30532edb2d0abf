#!/usr/bin/env bash
# The study's main job, and its test command.
#
#   ./run_all.sh                      set up if needed, build the benchmark, run every notebook of the cpu
#                                     profile's study (its outside_the_study notebooks: with --only)
#   ./run_all.sh --profile smoke      another profile (notebooks/profiles/<name>.yaml)
#   ./run_all.sh --only 00,01         a subset of notebooks (by number prefix)
#   ./run_all.sh --dataset DIR        your own data: a BEIR-layout directory (python -m longdoc.data.convert
#                                     makes one from MS MARCO / TREC / NQ320k / pair files)
#   ./run_all.sh --data ROLE=DIR      the dataset of one role's notebooks (repeatable): retrieval (00-24, 50),
#                                     matching (30-33, 51), nci (40-45), pretraining (a .txt file or BEIR
#                                     folder: every pre-training notebook's corpus); e.g. --data nci=data/nq320k
#   ./run_all.sh --backbone NAME      another backbone (a Hugging Face name, a local path, or manpages-mlm: built here)
#   ./run_all.sh --set NAME=VALUE     any other parameter of the profile (once each; value read as YAML, a
#                                     name or a path as typed)
#                                     (every run ends with the results report: RESULTS.md for cpu,
#                                      results/<profile>/RESULTS.md otherwise)
#   ./run_all.sh --allow-cpu          run a GPU profile (accelerator: gpu: paper, gpu) where torch sees no GPU
#                                     (without it the run stops before any work, saying so)
#   ./run_all.sh --dry-run            every check a run makes (options, profile values, datasets, the device),
#                                     then the notebooks it would run; nothing is built or trained
#   ./run_all.sh --deadline MINUTES   a run in pieces: no fit chain starts that the GPU-hour estimate says
#                                     cannot finish by then (LONGDOC_DEADLINE; python -m
#                                     longdoc.experiments.cache export FILE takes what finished along;
#                                     LONGDOC_MEASUREMENTS: step times to price with, e.g. a node check)
#   torchrun --nnodes N ... --no-python ./run_all.sh ..., or srun ./run_all.sh ...
#                                     under an outer launch: rank 0 runs the notebooks, every other rank its
#                                     process of each fit (n_devices = the launch's processes; README)
#   ./run_all.sh --tests              set up if needed, run pytest and the nbval notebook checks (smoke)
#   ./run_all.sh --setup              only create/refresh the environment
#   ./run_all.sh --pack DIR --node-freeze FILE [--max-mib 64 ...]
#                                     a pack for a GPU node without internet (python -m longdoc.pack --help);
#                                     on the node: bash DIR/node.sh -- --profile gpu --only 10
#   ./run_all.sh --check-gpu [--out DIR]
#                                     the node check (python -m longdoc.bench.node_check --help): device,
#                                     versions, the CUDA unit tests, one fit per family timed against the
#                                     estimate; one JSON and a log in results/gpu/node-check/ (<= 8 minutes)
#
# Environment: a virtualenv in .venv from requirements-cpu.txt (or the active conda env with
# LONGDOC_USE_ACTIVE_ENV=1, e.g. one made from environment.yml on a GPU node; its interpreter is
# LONGDOC_PYTHON or python). Notebooks run under
# papermill where it is installed, else in this Python process without a Jupyter kernel
# (python -m longdoc.run_notebook: same parameters cell, outputs and figures); LONGDOC_NOTEBOOK_RUNNER=
# papermill or in-process chooses.
set -uo pipefail
CALLER_DIR=$PWD  # relative paths on the command line are the caller's, not the checkout's
cd "$(dirname "$0")"
from_caller() { case "$1" in /*) echo "$1" ;; *) echo "$CALLER_DIR/$1" ;; esac; }

PROFILE=cpu
ONLY=""
ALLOW_CPU=""
DRY_RUN=""
MODE=study
OVERRIDES=()
PASS=()
DATASET=""
DEADLINE_MINUTES=""
ROLES_GIVEN=()
add_role_dataset() {  # --data ROLE=DIR: an existing directory, passed on as an absolute path
  local role="${1%%=*}" dir="${1#*=}"
  [[ "$1" == *=* && -n "$role" && -n "$dir" ]] || { echo "run_all.sh: --data ${1}: expected ROLE=DIR" >&2; exit 2; }
  [[ " ${ROLES_GIVEN[*]} " != *" $role "* ]] || { echo "run_all.sh: --data $role= is given twice: one dataset per role" >&2; exit 2; }
  local path
  path=$(from_caller "$dir")
  if [ "$role" = pretraining ] && [ -f "$path" ]; then  # a .txt corpus (documents between blank lines)
    ROLES_GIVEN+=("$role")
    OVERRIDES+=(--data "$role=$(cd "$(dirname "$path")" && pwd)/$(basename "$path")")
    return
  fi
  [ -d "$path" ] || { echo "run_all.sh: --data $1: $dir is not a directory (expected a BEIR-layout directory)" >&2; exit 2; }
  ROLES_GIVEN+=("$role")
  OVERRIDES+=(--data "$role=$(cd "$path" && pwd)")
}
once() {  # OPTION: an option that takes one value may be given once (a second would silently win)
  [[ " ${GIVEN[*]} " != *" $1 "* ]] || { echo "run_all.sh: $1 is given twice (give it once)" >&2; exit 2; }
  GIVEN+=("$1")
}
from_caller_set() {  # --set NAME=VALUE: a relative dataset or pre-training corpus path is the caller's
  local name="${1%%=*}" value="${1#*=}"
  case "$name" in
    dataset|pretrain_corpus)
      case "$value" in ""|/*|manpages|unjudged|installed-manpages|\'*|\"*) ;; *) value=$(from_caller "$value") ;; esac ;;
    backbone|qg_generator)  # a path when one exists from the caller's folder, else a name ('minilm', a hub name)
      case "$value" in ""|/*) ;; *) [ -e "$(from_caller "$value")" ] && value=$(from_caller "$value") ;; esac ;;
  esac
  echo "$name=$value"
}
value_of() {  # OPTION VALUE: the value an option needs, or exit 2 naming the option
  [ -n "$2" ] || { echo "run_all.sh: $1 needs a value (see --help)" >&2; exit 2; }
  echo "$2"
}
GIVEN=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) once --profile; PROFILE=$(value_of --profile "${2:-}") || exit 2; shift 2 ;;
    --profile=*) once --profile; PROFILE=$(value_of --profile "${1#*=}") || exit 2; shift ;;
    --only) once --only; ONLY=$(value_of "--only (a list like 00,01)" "${2:-}") || exit 2; shift 2 ;;
    --only=*) once --only; ONLY="${1#*=}"; [ -n "$ONLY" ] || { echo "run_all.sh: --only= needs a list like 00,01" >&2; exit 2; }; shift ;;
    --dataset) once --dataset; DATASET=$(value_of "--dataset (a directory)" "${2:-}") || exit 2; shift 2 ;;
    --dataset=*) once --dataset; DATASET="${1#*=}"; [ -n "$DATASET" ] || { echo "run_all.sh: --dataset= needs a directory" >&2; exit 2; }; shift ;;
    --data) add_role_dataset "${2:-}"; shift 2 ;;
    --data=*) add_role_dataset "${1#*=}"; shift ;;
    --backbone) once --backbone; value=$(value_of --backbone "${2:-}") || exit 2
                OVERRIDES+=(--set "$(from_caller_set "backbone=$value")"); shift 2 ;;
    --backbone=*) once --backbone; value=$(value_of --backbone "${1#*=}") || exit 2
                  OVERRIDES+=(--set "$(from_caller_set "backbone=$value")"); shift ;;
    --set) [[ "${2:-}" == *=* ]] || { echo "run_all.sh: --set ${2:-}: expected NAME=VALUE" >&2; exit 2; }
           OVERRIDES+=(--set "$(from_caller_set "$2")"); shift 2 ;;
    --deadline) once --deadline; DEADLINE_MINUTES=$(value_of "--deadline (minutes)" "${2:-}") || exit 2; shift 2 ;;
    --deadline=*) once --deadline; DEADLINE_MINUTES=$(value_of "--deadline (minutes)" "${1#*=}") || exit 2; shift ;;
    --allow-cpu) ALLOW_CPU=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --tests) MODE=tests; shift ;;
    --setup) MODE=setup; shift ;;
    --pack) MODE=pack; shift; PASS=("$@"); break ;;
    --check-gpu) MODE=check-gpu; shift; PASS=("$@"); break ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "$DRY_RUN$ALLOW_CPU" ] && [ "$MODE" != study ]; then
  echo "run_all.sh: --dry-run and --allow-cpu are for a study run (not with --tests, --setup, --pack or --check-gpu)" >&2; exit 2
fi
if [ -n "$DEADLINE_MINUTES" ] && ! [[ "$DEADLINE_MINUTES" =~ ^[0-9]+([.][0-9]+)?$ && "$DEADLINE_MINUTES" =~ [1-9] ]]; then
  echo "run_all.sh: --deadline $DEADLINE_MINUTES: expected minutes from now, a number above 0 (e.g. 50)" >&2; exit 2
fi
case "${LONGDOC_USE_ACTIVE_ENV:-0}" in 0|1) ;; *)
  echo "run_all.sh: LONGDOC_USE_ACTIVE_ENV=$LONGDOC_USE_ACTIVE_ENV: expected 1 (use the active environment) or 0" >&2; exit 2 ;;
esac
[[ "$PROFILE" =~ ^[A-Za-z0-9][A-Za-z0-9_-]*$ ]] || {
  echo "run_all.sh: --profile $PROFILE: a profile is a name (letters, digits, '-', '_'): notebooks/profiles/NAME.yaml" >&2; exit 2; }
NOTEBOOK_ROLES=()  # the roles that give notebooks their dataset (pretraining gives a corpus, beside --dataset)
for role in "${ROLES_GIVEN[@]}"; do [ "$role" = pretraining ] || NOTEBOOK_ROLES+=("$role"); done
if [ -n "$DATASET" ] && [ ${#NOTEBOOK_ROLES[@]} -gt 0 ]; then
  echo "run_all.sh: --dataset and --data both name datasets: --dataset gives every notebook one dataset, --data ROLE=DIR one role's; give one of them" >&2
  exit 2
fi
if [ -n "$DATASET" ]; then
  if [ "$DATASET" != manpages ]; then
    [ -d "$(from_caller "$DATASET")" ] || { echo "run_all.sh: --dataset $DATASET: not a directory (expected a BEIR-layout directory)" >&2; exit 2; }
    DATASET=$(cd "$(from_caller "$DATASET")" && pwd)
  fi
  OVERRIDES+=(--set "dataset=$DATASET")
fi

log() { printf '[run_all %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

PACKAGES="manpages manpages-dev man-db groff-base"  # what the embedded benchmark is rendered from

ensure_system_packages() {
  # only when the embedded benchmark must be built (Debian's man pages, rendered by man and groff);
  # never an unasked sudo: as root apt-get installs them, otherwise the message says what to run
  dpkg -s $PACKAGES >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing Debian packages $PACKAGES (the embedded benchmark is rendered from them)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES >/dev/null \
      || { echo "run_all.sh: could not install $PACKAGES" >&2; exit 1; }
    return 0
  fi
  local how="sudo apt-get install $PACKAGES"
  command -v apt-get >/dev/null || how="a Debian or Ubuntu machine (or container) with $PACKAGES"
  echo "run_all.sh: the embedded benchmark (data/manpages) is built from Debian's man pages: the packages" >&2
  echo "  $PACKAGES are missing. Install them ($how), or copy a built data/manpages" >&2
  echo "  from another checkout, or run on your own data with --dataset DIR." >&2
  exit 1
}

benchmark_built() {
  "$PY" -c "import sys; from longdoc.data.registry import benchmark_built; sys.exit(0 if benchmark_built() else 1)"
}

ensure_benchmark() {
  benchmark_built && return 0
  ensure_system_packages
  log "building the embedded benchmark (data/manpages)"
  "$PY" -c "from longdoc.data import load_dataset; load_dataset('manpages')" || exit 1
}

find_python() {
  # Python >= 3.11 (numpy and pandas pins need it): LONGDOC_PYTHON, else python3
  local candidate="${LONGDOC_PYTHON:-python3}"
  if ! "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "run_all.sh: $candidate is $("$candidate" --version 2>&1 || echo missing); the study needs Python >= 3.11." >&2
    echo "  Point LONGDOC_PYTHON at one (e.g. LONGDOC_PYTHON=python3.11 ./run_all.sh ...)." >&2
    exit 1
  fi
  echo "$candidate"
}

install_cpu_torch() {
  # PyTorch's CPU wheel index when it answers (PyPI's Linux torch is the CUDA build: gigabytes of
  # nvidia-* wheels), else the package index pip is configured with (here: a CPU build on disk)
  local index=https://download.pytorch.org/whl/cpu
  if [ "$(uname -s)" = Linux ] && "$1" -c "import urllib.request as u; u.urlopen('$index/torch/', timeout=5)" 2>/dev/null; then
    "$1" -m pip install -q torch==2.13.0 --index-url "$index" && return 0
  fi
  "$1" -m pip install -q torch==2.13.0
}

ensure_python_env() {
  if [ "${LONGDOC_USE_ACTIVE_ENV:-0}" = 1 ]; then
    PY="${LONGDOC_PYTHON:-python}"
    command -v "$PY" >/dev/null || { echo "run_all.sh: LONGDOC_PYTHON=$PY: no such program" >&2; exit 2; }
    return
  fi
  local stamp want python
  want=$(cat requirements-common.txt requirements-cpu.txt pyproject.toml | sha256sum | cut -c1-16)
  stamp=.venv/.longdoc-setup
  if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    python=$(find_python) || exit 1
    log "setting up .venv with $python (pip, CPU torch 2.13.0)"
    "$python" -m venv .venv || exit 1
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null || exit 1
    install_cpu_torch .venv/bin/python || exit 1
    .venv/bin/python -m pip install -q -r requirements-cpu.txt || exit 1
    .venv/bin/python -m pip install -q --no-deps -e . || exit 1
    echo "$want" > "$stamp"
  fi
  PY=.venv/bin/python
}

setup() {
  ensure_python_env
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0 MPLBACKEND=Agg
  export LONGDOC_PROGRESS="${LONGDOC_PROGRESS:-final}"  # one line per loop in executed notebooks
}

run_tests() {
  local started
  started=$(date +%s)
  setup
  ensure_benchmark  # tests and the smoke notebooks read it
  log "ruff (lint and format, rules in pyproject.toml), pytest (unit tests, on every core) and nbval (notebooks under the smoke profile)"
  # nbval re-executes every notebook (smoke defaults, fp32) and compares the cells tagged
  # nbval-check-output with the outputs stored in them, through notebooks/nbval-sanitize.cfg. The suite
  # prints each part's time and peak disk, the slowest tests and notebooks, and fails over its budget
  # (longdoc.bench.suite.BUDGET)
  "$PY" -m longdoc.bench.suite --started "$started"
}

notebook_runner() {
  # papermill (a Jupyter kernel) where installed, else this process (python -m longdoc.run_notebook)
  local runner="${LONGDOC_NOTEBOOK_RUNNER:-}"
  if [ -z "$runner" ]; then
    # found, not imported (importing both takes seconds)
    if "$PY" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('papermill') and u.find_spec('ipykernel')))" 2>/dev/null; then
      runner=papermill
    else
      runner=in-process
    fi
  fi
  case "$runner" in
    papermill|in-process) echo "$runner" ;;
    *) echo "run_all.sh: LONGDOC_NOTEBOOK_RUNNER=$runner: expected papermill or in-process" >&2; return 2 ;;
  esac
}

execute_notebook() {  # NOTEBOOK OUTPUT VALUES
  if [ "$RUNNER" = papermill ]; then
    # the kernel's inline backend (not the Agg of tests) keeps each figure in the executed notebook
    env -u MPLBACKEND "$PY" -m papermill "$1" "$2" -f "$3" -k python3 --log-level WARNING --progress-bar
  else
    MPLBACKEND=Agg "$PY" -m longdoc.run_notebook "$1" "$2" -f "$3"  # figures kept as a kernel keeps them
  fi
}

OUTER=""
SERVE_PID=""
end_outer_launch() {  # rank 0 of an outer launch, on its way out: the followers stop
  [ -n "$OUTER" ] || return 0
  "$PY" -m longdoc.launch end
  [ -z "$SERVE_PID" ] || wait "$SERVE_PID"
}

run_study() {
  setup
  RUNNER=$(notebook_runner) || exit 2
  local params="notebooks/profiles/$PROFILE.yaml"
  [ -f "$params" ] || { echo "run_all.sh: no profile '$PROFILE' ($params missing)" >&2; exit 2; }
  local notebooks=() failed=() nb
  if [ -n "$ONLY" ]; then
    # --only '01, 10' is 01,10; an unknown or repeated notebook is refused, naming what exists
    local selected
    selected=$("$PY" -m longdoc.experiments.preflight --only "$ONLY") || exit 2
    [ "$selected" = "$ONLY" ] || log "--only '$ONLY' read as $selected"
    ONLY=$selected
  fi
  local outside=""  # without --only: the notebooks the profile leaves out of its study (outside_the_study)
  if [ -z "$ONLY" ]; then
    outside=$("$PY" -m longdoc.experiments.preflight --outside "$params") || exit 2
    [ -z "$outside" ] || log "left out of the $PROFILE study (its profile's outside_the_study; --only runs them): $outside"
  fi
  for nb in notebooks/[0-9][0-9]_*.ipynb; do
    if [ -n "$ONLY" ] && ! [[ ",$ONLY," == *",$(basename "$nb" | cut -c1-2),"* ]]; then continue; fi
    if [[ ",$outside," == *",$(basename "$nb" | cut -c1-2),"* ]]; then continue; fi
    notebooks+=("$nb")
  done
  [ ${#notebooks[@]} -gt 0 ] || { echo "run_all.sh: no notebook matches --only $ONLY" >&2; exit 2; }
  # every notebook's parameters are checked before the first one starts
  work=$(mktemp -d "${TMPDIR:-/tmp}/longdoc-run.XXXXXX") || exit 1  # global: the EXIT trap reads it
  trap 'end_outer_launch; rm -rf "$work"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  for nb in "${notebooks[@]}"; do
    "$PY" -m longdoc.experiments.profiles "$params" "$nb" "${OVERRIDES[@]}" > "$work/$(basename "$nb" .ipynb).yaml" || exit 2
  done
  # where each record goes: a rerun of the profile as its file says replaces the profile's records (each
  # line says which); a run with other values never writes where they go (refused here, for every notebook)
  "$PY" -m longdoc.experiments.records --profile "$PROFILE" --notes "$work" "$work"/*.yaml > "$work/slots.txt" || exit 2
  # every dataset, the cache folder and every pre-training corpus the selected notebooks read, before the first
  local cache="${LONGDOC_CACHE:-${LONGDOC_DATA:-data}/cache}"
  # a GPU profile (accelerator: gpu) where torch sees no GPU, or n_devices above the GPUs seen, stops here
  # (it prints the device the numbers are made on: the GPUs, or the CPU and its threads)
  "$PY" -m longdoc.experiments.preflight --cache "$cache" --profile-file "$params" ${ALLOW_CPU:+--allow-cpu} \
    "$work"/*.yaml > "$work/device.txt" || exit 2
  while read -r line; do log "$line"; done < "$work/slots.txt"
  while read -r line; do log "$line"; done < "$work/device.txt"
  log "notebooks run by: $RUNNER"
  if [ -n "$DRY_RUN" ]; then
    log "dry run: every check passed; would run ${#notebooks[@]} notebook(s): ${notebooks[*]}"
    return 0
  fi
  # under an outer launch (torchrun --nnodes N ... --no-python ./run_all.sh, or srun ./run_all.sh) rank 0
  # runs the notebooks and every other rank runs its process of each fit (python -m longdoc.launch)
  local role
  role=$("$PY" -m longdoc.launch role) || exit 2
  case "$role" in
    follower)
      log "a rank of the outer launch: running its process of each fit rank 0 starts"
      "$PY" -m longdoc.launch follow; exit $? ;;
    "leader srun")
      "$PY" -m longdoc.launch serve & SERVE_PID=$!  # srun has no agent to hold the ranks' store
      OUTER=1; log "rank 0 of the outer srun launch: the notebooks run here, each fit on every rank" ;;
    leader*)
      OUTER=1; log "rank 0 of the outer torchrun launch: the notebooks run here, each fit on every rank" ;;
  esac
  if grep -qx "dataset: manpages" "$work"/*.yaml 2>/dev/null; then
    ensure_benchmark
  fi
  if [ -n "$DEADLINE_MINUTES" ]; then
    LONGDOC_DEADLINE=$("$PY" -c "import sys, time; print(int(time.time() + 60 * float(sys.argv[1])))" "$DEADLINE_MINUTES") \
      || { echo "run_all.sh: --deadline $DEADLINE_MINUTES: expected minutes" >&2; exit 2; }
    export LONGDOC_DEADLINE
  fi
  if [ -n "${LONGDOC_DEADLINE:-}" ]; then
    "$PY" -c "from longdoc.experiments.deadline import deadline; deadline()" || exit 2
    log "deadline: $LONGDOC_DEADLINE (no fit chain starts that the estimate says cannot finish by then)"
  fi
  local i=0 start seconds status name own executed
  local timings="results/$PROFILE/timings.tsv" built
  for nb in "${notebooks[@]}"; do
    i=$((i + 1)); start=$(date +%s); name=$(basename "$nb" .ipynb)
    # a record outside the profile's own folder (other data) files its executed notebook and timing apart
    own=$(cat "$work/$name.folder"); executed="results/$PROFILE/executed${own:+/$own}"
    log "[$i/${#notebooks[@]}] $nb (profile $PROFILE)"
    # executed into a temporary folder; only a notebook that finishes lands in results/
    touch "$work/started"
    unset LONGDOC_FIT_PRICES
    if [ -n "${LONGDOC_DEADLINE:-}" ]; then
      if [ "$(date +%s)" -ge "${LONGDOC_DEADLINE%.*}" ]; then
        log "[$i/${#notebooks[@]}] $nb not started: the deadline has passed"; failed+=("$nb (deadline)"); continue
      fi
      # each fit's priced seconds to the end of its chain, at this notebook's values (not for 00 and 90)
      if "$PY" -m longdoc.bench.gpu_hours --profile "$PROFILE" --only "${name:0:2}" --parameters "$work/$name.yaml" \
           ${LONGDOC_MEASUREMENTS:+--measurements "$LONGDOC_MEASUREMENTS"} --fit-prices "$work/$name.prices.json" \
           2> "$work/$name.prices.err"; then
        export LONGDOC_FIT_PRICES="$work/$name.prices.json"
      else
        log "[$i/${#notebooks[@]}] no fit prices for $name (only a passed deadline stops its fits): $(tail -1 "$work/$name.prices.err")"
      fi
    fi
    if execute_notebook "$nb" "$work/$name.ipynb" "$work/$name.yaml"; then
      status=ok
      mkdir -p "$executed"
      mv -f "$work/$name.yaml" "$executed/$name.parameters.yaml" && mv -f "$work/$name.ipynb" "$executed/$name.ipynb"
    else
      status=failed; failed+=("$nb")
      mkdir -p "${TMPDIR:-/tmp}/longdoc-failed"
      mv -f "$work/$name.ipynb" "${TMPDIR:-/tmp}/longdoc-failed/$PROFILE-$name.ipynb" 2>/dev/null \
        && log "the failed notebook, executed up to its error: ${TMPDIR:-/tmp}/longdoc-failed/$PROFILE-$name.ipynb"
      if grep -q DeadlineReached "${TMPDIR:-/tmp}/longdoc-failed/$PROFILE-$name.ipynb" 2>/dev/null; then
        status=deadline; failed[${#failed[@]}-1]="$nb (deadline)"
        log "[$i/${#notebooks[@]}] $nb stopped before a fit chain the deadline leaves no time for; export what finished:"
        log "  python -m longdoc.experiments.cache export FILE (then import FILE where the run goes on)"
      fi
    fi
    seconds=$(( $(date +%s) - start ))
    mkdir -p "results/$PROFILE"
    # artefacts (fits, pre-trainings) this run built; the others it used came from the cache
    # (fits and pre-trainings: not the small values cached beside them, a probe or a cost, which hold value.json)
    built=$(find "$cache" -mindepth 3 -maxdepth 3 -name key.json -newer "$work/started" -execdir test ! -e value.json \; -print 2>/dev/null | wc -l)
    printf '%s\t%s\t%s\t%s\t%s\n' "${own:+$own/}$name" "$seconds" "$status" "$(date -u +%FT%TZ)" "$built" >> "$timings"
    log "[$i/${#notebooks[@]}] $nb $status after ${seconds}s ($built artefacts trained, the rest from the cache)"
    if [ "$status" = ok ] && [ -f "$work/$name.replaced" ]; then log "[$i/${#notebooks[@]}] $(cat "$work/$name.replaced")"; fi
  done
  log "results report from every record of profile $PROFILE"
  "$PY" -m longdoc.experiments.report --profile "$PROFILE" || failed+=("report")
  if [ ${#failed[@]} -gt 0 ]; then
    log "failed: ${failed[*]}"
    exit 1
  fi
  log "all ${#notebooks[@]} notebooks ran; results in results/$PROFILE, figures in figures/$PROFILE"
}

case "$MODE" in
  tests) run_tests ;;
  setup) setup; log "environment ready ($PY)" ;;
  pack) setup; "$PY" -m longdoc.pack "${PASS[@]}" ;;
  check-gpu) setup; "$PY" -m longdoc.bench.node_check "${PASS[@]}" ;;
  study) run_study ;;
esac
