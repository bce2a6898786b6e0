#!/usr/bin/env bash
# Every GPU check of ztc in one prepared script, in two halves, as the GPU
# node has no MLIR (docs/gpu.md):
#
#   test/gpu/run_all.sh prepare DIR [options]     where ztc is built
#   test/gpu/run_all.sh run DIR [options]         on the GPU node
#   test/gpu/run_all.sh check DIR                 anywhere: is DIR complete?
#
# prepare builds the MPI-free runtime (cmake -S runtime -B build-gpu), then
# the correctness bundle (test/gpu/gpu_check.py prepare DIR/check) and the
# speed bundle (bench/gpu_train.py prepare DIR/bench) with it, and checks
# them. run, from a copy of the repository holding DIR, runs the stages
# below within a budget (default 570 s), each under its own timeout; a
# stage that fails or runs out of time is recorded and the next one runs.
# It ends with DIR/results.json (every figure) and DIR/results.md (the
# summary, also printed), written by test/gpu/results.py; the stages' logs
# are in DIR/logs/.
#
#   device   nvidia-smi: the GPU, its driver and CUDA version, the date
#   check    gpu_check.py run: the CUDA step against the CPU's, and
#            compute-sanitizer's memcheck and racecheck
#   memory   gpu_train.py memory: per bench row, the planned peak per rank
#            (memory.json's total_bytes) against the measured one
#            (ztc-train --device-memory-report), flagged outside 2%
#   bench    gpu_train.py run: ms per step against PyTorch eager and
#            torch.compile, fp32 and bf16, with the losses checked
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

usage() {
  cat <<EOF
USAGE: test/gpu/run_all.sh prepare DIR [--ztc ZTC] [--ztc-train ZTC_TRAIN]
                                       [--only STAGES] [--cases A,B]
                                       [--models M,N]
       test/gpu/run_all.sh run DIR [--budget SECONDS] [--only STAGES]
                                   [--timeouts STAGE=SECONDS,...]
       test/gpu/run_all.sh check DIR

prepare (where ztc is built, from the repository root's build/):
  --ztc ZTC              the compiler (default: build/bin/ztc)
  --ztc-train ZTC_TRAIN  a runtime-only ztc-train to ship; default: build
                         one (cmake -S runtime -B build-gpu -G Ninja
                         -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON, ninja)
  --only STAGES          prepare for a subset of check,memory,bench (device
                         needs nothing); run then runs those
  --cases A,B            gpu_check.py's cases (default: all)
  --models M,N           gpu_train.py's models (default: its rows)
run (on the GPU node; needs CUDA, Python 3 with numpy, PyTorch for bench;
\$PYTHON picks the interpreter):
  --budget SECONDS       the whole run's limit (default 570)
  --only STAGES          a subset of device,check,memory,bench (default:
                         device and those prepared)
  --timeouts S=N,...     a stage's limit (defaults: device=20, check=200,
                         memory=60, bench=280), cut to what the budget has
                         left (the bench writes each row as it ends: a
                         timeout keeps those)
check: DIR holds what run needs (exit 1 naming what is missing).

Results: DIR/results.json and DIR/results.md; logs in DIR/logs/.
EOF
}

die() {
  echo "run_all.sh: error: $*" >&2
  exit 1
}

# The interpreter: $PYTHON where set, the repository's venv where there is
# one (the build machine), else python3 (the node's, with PyTorch).
python_bin() {
  if [[ -n "${PYTHON:-}" ]]; then
    command -v "$PYTHON" >/dev/null || die "PYTHON=$PYTHON is not a program"
    echo "$PYTHON"
  elif [[ -x "$ROOT/.venv/bin/python" ]]; then
    echo "$ROOT/.venv/bin/python"
  elif command -v python3 >/dev/null; then
    command -v python3
  else
    die "no python3 on PATH (and no $ROOT/.venv)"
  fi
}

# An argument of MODE that is no option of its own: --help, the one DIR,
# or an error naming it. Sets dir.
other_argument() {
  case "$2" in
    -h|--help) usage; exit 0 ;;
    -*) die "$1: unknown option '$2' (see --help)" ;;
    *) [[ -z "$dir" ]] || die "$1: one DIR only; got '$dir' and '$2'"
       dir="$2" ;;
  esac
}

# ----------------------------------------------------------------- prepare

prepare() {
  local dir="" ztc="$ROOT/build/bin/ztc" train="" cases="" models="" only="check,memory,bench"
  while (($#)); do
    case "$1" in
      --only) only="${2:?--only needs stages}"; shift 2 ;;
      --ztc) ztc="${2:?--ztc needs a path}"; shift 2 ;;
      --ztc-train) train="${2:?--ztc-train needs a path}"; shift 2 ;;
      --cases) cases="${2:?--cases needs names}"; shift 2 ;;
      --models) models="${2:?--models needs names}"; shift 2 ;;
      *) other_argument prepare "$1"; shift ;;
    esac
  done
  [[ -n "$dir" ]] || die "prepare: no DIR given (see --help)"
  local stage
  for stage in ${only//,/ }; do
    [[ "$stage" =~ ^(check|memory|bench)$ ]] ||
      die "prepare: --only: unknown stage '$stage' (check, memory, bench)"
  done
  [[ -x "$ztc" ]] || die "prepare: no ztc at $ztc (build it: scripts/build.sh, or give --ztc)"
  local py
  py="$(python_bin)"
  if [[ -z "$train" ]]; then
    command -v ninja >/dev/null || die "prepare: ninja is not on PATH (needed to build the runtime)"
    echo "== building the MPI-free runtime in build-gpu/"
    (cd "$ROOT" && cmake -S runtime -B build-gpu -G Ninja \
       -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null && ninja -C build-gpu) ||
      die "prepare: building the runtime (cmake -S runtime -B build-gpu) failed"
    train="$ROOT/build-gpu/bin/ztc-train"
  fi
  [[ -x "$train" ]] || die "prepare: no ztc-train at $train"
  # The steps compile against this repository's kernel headers, those of
  # the runtime the bundle ships (ztc's own default is its build's source).
  export ZTC_RUNTIME_DIR="${ZTC_RUNTIME_DIR:-$ROOT/runtime}"
  mkdir -p "$dir" || die "prepare: cannot create $dir"
  dir="$(cd "$dir" && pwd)"
  rm -f "$dir/prepared.json"
  if [[ ",$only," == *,check,* ]]; then
    echo "== the correctness bundle: gpu_check.py prepare $dir/check"
    "$py" "$HERE/gpu_check.py" prepare "$dir/check" --ztc "$ztc" --ztc-train "$train" \
      ${cases:+--cases "$cases"} || die "prepare: gpu_check.py prepare failed"
  fi
  if [[ ",$only," == *,memory,* || ",$only," == *,bench,* ]]; then
    echo "== the speed and memory bundle: gpu_train.py prepare $dir/bench"
    "$py" "$ROOT/bench/gpu_train.py" prepare "$dir/bench" --ztc-train "$train" \
      --build "$(dirname "$(dirname "$ztc")")" ${models:+--models "$models"} ||
      die "prepare: gpu_train.py prepare failed"
  fi
  "$py" "$HERE/results.py" prepared "$dir" --stages "device,$only" --repository "$ROOT" ||
    die "prepare: cannot write $dir/prepared.json"
  check "$dir" || exit 1
  echo "== prepared $dir ($(du -sh "$dir" | cut -f1)); on the node, from a copy of the"
  echo "   repository holding it: test/gpu/run_all.sh run <that DIR>"
}

# ------------------------------------------------------------------- check

# What run needs, each missing thing named.
check() {
  local dir="${1:-}"
  [[ -n "$dir" ]] || die "check: no DIR given (see --help)"
  [[ -d "$dir" ]] || die "check: $dir is not a directory (make it with: run_all.sh prepare $dir)"
  "$(python_bin)" "$HERE/results.py" check "$dir"
}

# --------------------------------------------------------------------- run

# Seconds per stage; together 560, under the default budget of 570, which
# fits a 10-minute call on the node with the summary.
declare -A TIMEOUT=([device]=20 [check]=200 [memory]=60 [bench]=280)
STAGES=(device check memory bench)

run() {
  local dir="" budget=570 only="" timeouts=""
  while (($#)); do
    case "$1" in
      --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
      --only) only="${2:?--only needs stages}"; shift 2 ;;
      --timeouts) timeouts="${2:?--timeouts needs STAGE=SECONDS,...}"; shift 2 ;;
      *) other_argument run "$1"; shift ;;
    esac
  done
  [[ -n "$dir" ]] || die "run: no DIR given (see --help)"
  [[ "$budget" =~ ^[0-9]+$ ]] || die "run: --budget expects seconds, got '$budget'"
  local item stage
  for item in ${timeouts//,/ }; do
    stage="${item%%=*}"
    [[ -n "${TIMEOUT[$stage]:-}" && "${item#*=}" =~ ^[0-9]+$ ]] ||
      die "run: --timeouts: '$item' is not STAGE=SECONDS with a stage of ${STAGES[*]}"
    TIMEOUT[$stage]="${item#*=}"
  done
  check "$dir" || exit 1
  dir="$(cd "$dir" && pwd)"
  local py start logs
  py="$(python_bin)"
  [[ -n "$only" ]] || only="$("$py" "$HERE/results.py" stages "$dir")" ||
    die "run: cannot read the stages of $dir/prepared.json"
  local wanted
  IFS=, read -r -a wanted <<<"$only"
  for stage in "${wanted[@]}"; do
    [[ -n "${TIMEOUT[$stage]:-}" ]] || die "run: --only: unknown stage '$stage' (${STAGES[*]})"
  done
  command -v timeout >/dev/null || die "run: timeout (coreutils) is not on PATH"
  start=$SECONDS
  logs="$dir/logs"
  rm -rf "$logs" "$dir/results.json" "$dir/results.md"
  mkdir -p "$logs"
  : >"$logs/stages.tsv"
  for stage in "${wanted[@]}"; do
    # 15 s stay for the summary; a stage gets at most what is left.
    local left=$((budget - (SECONDS - start) - 15))
    local limit=$((TIMEOUT[$stage] < left ? TIMEOUT[$stage] : left))
    if ((limit < 5)); then
      printf '%s\tskipped\t\t0\t%s\n' "$stage" "${TIMEOUT[$stage]}" >>"$logs/stages.tsv"
      echo "== $stage: skipped, the budget of $budget s is spent"
      continue
    fi
    echo "== $stage (at most $limit s; log: logs/$stage.log)"
    local began=$SECONDS rc argv
    stage_argv "$stage" "$py" "$dir"
    # timeout signals the stage's whole process group: its trainers too.
    timeout --kill-after=10 "$limit" "${argv[@]}" >"$logs/$stage.log" 2>&1
    rc=$?
    local status=ok
    if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc != 0)); then status=failed; fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$stage" "$status" "$rc" "$((SECONDS - began))" "$limit" \
      >>"$logs/stages.tsv"
    echo "   $status (exit $rc, $((SECONDS - began)) s)"
  done
  "$py" "$HERE/results.py" summarize "$dir" --budget "$budget" ||
    die "run: writing the results failed (the logs are in $logs)"
  cat "$dir/results.md"
}

# STAGE PYTHON DIR: sets argv, the stage's command.
stage_argv() {
  local py="$2" dir="$3"
  case "$1" in
    device) argv=("$py" "$HERE/results.py" device "$dir") ;;
    check) argv=("$py" "$HERE/gpu_check.py" run "$dir/check" --out "$dir/logs/check") ;;
    memory) argv=("$py" "$ROOT/bench/gpu_train.py" memory "$dir/bench"
                  --json "$dir/logs/memory.json") ;;
    bench) argv=("$py" "$ROOT/bench/gpu_train.py" run "$dir/bench"
                 --json "$dir/logs/bench.json") ;;
  esac
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  check) shift; check "$@" ;;
  -h|--help|help) usage ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown mode '$1': prepare, run or check (see --help)" ;;
esac
