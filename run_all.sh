#!/usr/bin/env bash
# The study's main job, and its test command.
#
#   ./run_all.sh                      set up if needed, build the benchmark, run every notebook (cpu profile)
#   ./run_all.sh --profile smoke      another profile (notebooks/profiles/<name>.yaml)
#   ./run_all.sh --only 00,01         a subset of notebooks (by number prefix)
#                                     (every run ends with the results report: RESULTS.md for cpu,
#                                      results/<profile>/RESULTS.md otherwise)
#   ./run_all.sh --tests              set up if needed, run pytest and the nbval notebook checks (smoke)
#   ./run_all.sh --setup              only create/refresh the environment
#
# Environment: a virtualenv in .venv from requirements-cpu.txt (or the active conda env with
# LONGDOC_USE_ACTIVE_ENV=1, e.g. one made from environment.yml on a GPU node).
set -uo pipefail
cd "$(dirname "$0")"

PROFILE=cpu
ONLY=""
MODE=study
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) PROFILE="${2:?--profile needs a name}"; shift 2 ;;
    --profile=*) PROFILE="${1#*=}"; shift ;;
    --only) ONLY="${2:?--only needs a list like 00,01}"; shift 2 ;;
    --only=*) ONLY="${1#*=}"; [ -n "$ONLY" ] || { echo "run_all.sh: --only= needs a list like 00,01" >&2; exit 2; }; shift ;;
    --tests) MODE=tests; shift ;;
    --setup) MODE=setup; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf '[run_all %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

ensure_system_packages() {
  # the embedded benchmark is rendered from Debian's man pages by the system's man/groff
  if ! dpkg -s manpages manpages-dev man-db groff-base >/dev/null 2>&1; then
    log "installing Debian packages manpages manpages-dev man-db groff-base"
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq manpages manpages-dev man-db groff-base >/dev/null
    else
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq manpages manpages-dev man-db groff-base >/dev/null
    fi || { echo "run_all.sh: could not install manpages manpages-dev man-db groff-base" >&2; exit 1; }
  fi
}

ensure_python_env() {
  if [ "${LONGDOC_USE_ACTIVE_ENV:-0}" = 1 ]; then PY=python; return; fi
  local stamp want
  want=$(cat requirements-cpu.txt pyproject.toml | sha256sum | cut -c1-16)
  stamp=.venv/.longdoc-setup
  if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "setting up .venv (pip, CPU torch 2.13.0)"
    python3 -m venv .venv || exit 1
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null || exit 1
    .venv/bin/python -m pip install -q torch==2.13.0 || exit 1
    .venv/bin/python -m pip install -q -r requirements-cpu.txt || exit 1
    .venv/bin/python -m pip install -q --no-deps -e . || exit 1
    echo "$want" > "$stamp"
  fi
  PY=.venv/bin/python
}

setup() {
  ensure_system_packages
  ensure_python_env
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0 MPLBACKEND=Agg
}

run_tests() {
  setup
  log "pytest (unit tests) and nbval (notebooks under the smoke profile)"
  "$PY" -m pytest tests -p no:cacheprovider && "$PY" -m pytest -p no:cacheprovider --nbval-lax notebooks
}

run_study() {
  setup
  local params="notebooks/profiles/$PROFILE.yaml"
  [ -f "$params" ] || { echo "run_all.sh: no profile '$PROFILE' ($params missing)" >&2; exit 2; }
  log "building the embedded benchmark (kept if already built)"
  "$PY" -c "from longdoc.data import load_dataset; load_dataset('manpages')" || exit 1
  local notebooks=() failed=() nb
  for nb in notebooks/[0-9][0-9]_*.ipynb; do
    if [ -n "$ONLY" ] && ! [[ ",$ONLY," == *",$(basename "$nb" | cut -c1-2),"* ]]; then continue; fi
    notebooks+=("$nb")
  done
  [ ${#notebooks[@]} -gt 0 ] || { echo "run_all.sh: no notebook matches --only $ONLY" >&2; exit 2; }
  local i=0 start out seconds status params_file
  local timings="results/$PROFILE/timings.tsv"
  mkdir -p "results/$PROFILE/executed"
  for nb in "${notebooks[@]}"; do
    i=$((i + 1)); start=$(date +%s)
    out="results/$PROFILE/executed/$(basename "$nb")"
    params_file="results/$PROFILE/executed/$(basename "$nb" .ipynb).parameters.yaml"
    log "[$i/${#notebooks[@]}] $nb (profile $PROFILE)"
    # each notebook gets the profile's values of the parameters it declares (checked before it starts)
    if ! "$PY" -m longdoc.experiments.profiles "$params" "$nb" > "$params_file"; then failed+=("$nb"); continue; fi
    if "$PY" -m papermill "$nb" "$out" -f "$params_file" -k python3 --log-level WARNING --progress-bar; then
      status=ok
    else
      status=failed; failed+=("$nb")
    fi
    seconds=$(( $(date +%s) - start ))
    printf '%s\t%s\t%s\t%s\n' "$(basename "$nb" .ipynb)" "$seconds" "$status" "$(date -u +%FT%TZ)" >> "$timings"
    log "[$i/${#notebooks[@]}] $nb $status after ${seconds}s (executed copy: $out)"
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
  study) run_study ;;
esac
