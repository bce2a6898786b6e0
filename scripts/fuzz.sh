#!/usr/bin/env bash
# Runs every libFuzzer target of test/fuzz for SECONDS each (default 60),
# ZTC_JOBS of them at a time (default 2, one per core), in the sanitizer
# build (scripts/sanitize.sh builds it).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]    TARGET: npy checkpoint manifest
#                                            ds-config token-dataset
#                                            onnx-binary onnx-text (all)
#
# Seeds come from the examples and tests (test/fuzz/make_seeds.py, and the
# example MLP compiled into a training artifact whose step is built with
# AddressSanitizer, for the manifest target). Each target keeps its corpus in
# build-sanitize/fuzz/corpus/TARGET across runs, so longer runs build on
# earlier ones; executions per run are appended to
# build-sanitize/fuzz/executions.tsv (date, target, seconds, executions).
# A crash, hang (10 s), leak or oracle failure fails the run and leaves the
# input in build-sanitize/fuzz/crashes/TARGET/: once fixed, add it to
# test/fuzz/regressions/TARGET/, where ctest replays it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH=60
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  SECONDS_EACH="$1"
  shift
fi
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(npy checkpoint manifest ds-config token-dataset onnx-binary onnx-text)

"$ROOT/scripts/sanitize.sh" --build-only
BUILD="$ROOT/build-sanitize"
WORK="$BUILD/fuzz"
source "$ROOT/scripts/sanitizer-options.sh"
# Fuzzing runs without the fake stacks that find use-after-return: readers
# that throw would run five times slower. The sanitizer suite keeps them.
export ASAN_OPTIONS="$ASAN_OPTIONS:detect_stack_use_after_return=0"
mkdir -p "$WORK"

# Seeds are made once per change of the generator (two fuzz.sh runs may
# share them, on one target each).
if [[ ! -f "$WORK/seeds/.made" || "$ROOT/test/fuzz/make_seeds.py" -nt "$WORK/seeds/.made" ]]; then
  echo "fuzz.sh: preparing seeds"
  rm -rf "$WORK/seeds"
  "$ROOT/.venv/bin/python" "$ROOT/test/fuzz/make_seeds.py" "$WORK/seeds" \
    --repo "$ROOT"
  touch "$WORK/seeds/.made"
fi

# The manifest target's artifact: the example MLP. The sanitizer build
# compiles steps with AddressSanitizer, so a manifest the loader wrongly
# accepts shows as a memory error in the step.
ARTIFACT="$WORK/artifact"
if [[ " ${TARGETS[*]} " == *" manifest "* && ! -f "$ARTIFACT/step.so" ]]; then
  echo "fuzz.sh: compiling the manifest target's artifact"
  rm -rf "$ARTIFACT" "$WORK/mlp"
  "$ROOT/.venv/bin/python" "$ROOT/examples/onnx/make_mlp.py" \
    --out "$WORK/mlp" --quiet
  "$BUILD/bin/ztc" compile "$WORK/mlp/mlp.onnx" -o "$ARTIFACT" \
    --batch-size 4 --loss cross_entropy --optimizer adamw
fi
mkdir -p "$WORK/seeds/manifest"
[[ -f "$ARTIFACT/manifest.json" ]] &&
  cp "$ARTIFACT/manifest.json" "$WORK/seeds/manifest/mlp-train.json"
export ZTC_FUZZ_ARTIFACT="$ARTIFACT"
# The ds-config target starts from the configs the driver tests compile,
# the third-party corpus (comments, trailing and missing commas, CRLF) and
# the lenient forms recorded from hjson (test/fixtures/deepspeed/hjson.json).
mkdir -p "$WORK/seeds/ds-config"
cp "$ROOT"/test/lit/driver/Inputs/ds_config/*.json \
  "$ROOT"/test/fixtures/ds_corpus/*.json "$WORK/seeds/ds-config/"
"$ROOT/.venv/bin/python" -c '
import json, sys
cases = json.load(open(sys.argv[1]))
for index, case in enumerate(cases):
    with open("%s/hjson-%02d" % (sys.argv[2], index), "w") as f:
        f.write(case["text"])
' "$ROOT/test/fixtures/deepspeed/hjson.json" "$WORK/seeds/ds-config"
# The targets' scratch files, removed whatever happens.
ZTC_FUZZ_SCRATCH="$(mktemp -d /dev/shm/ztc-fuzz.XXXXXX 2>/dev/null || mktemp -d)"
export ZTC_FUZZ_SCRATCH
trap 'rm -rf "$ZTC_FUZZ_SCRATCH"' EXIT

# One target: its report when it ends, its status in $WORK/TARGET.status.
fuzz_one() {
  local target="$1"
  local fuzzer="$BUILD/bin/ztc-fuzz-$target"
  local corpus="$WORK/corpus/$target"
  local crashes="$WORK/crashes/$target"
  local log="$WORK/$target.log"
  mkdir -p "$corpus" "$crashes"
  # Models and checkpoints need room; the readers' inputs stay small.
  if "$fuzzer" -max_total_time="$SECONDS_EACH" -timeout=10 \
      -rss_limit_mb=4096 -max_len=16384 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$corpus" "$WORK/seeds/$target" \
      >"$log" 2>&1; then
    local execs
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
    echo "fuzz.sh: $target: ${execs:-?} executions, no failure"
    printf '%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" \
      "$SECONDS_EACH" "${execs:-0}" >>"$WORK/executions.tsv"
    echo 0 >"$WORK/$target.status"
  else
    { echo "fuzz.sh: $target FAILED; the report ends:"
      grep -vE '^#[0-9]+' "$log" | tail -40
      echo "fuzz.sh: input(s) in $crashes (full log: $log)"; } >&2
    echo 1 >"$WORK/$target.status"
  fi
}

for target in "${TARGETS[@]}"; do
  [[ -x "$BUILD/bin/ztc-fuzz-$target" ]] || { echo "fuzz.sh: no fuzz target '$target'" >&2; exit 2; }
  rm -f "$WORK/$target.status"
done
JOBS="${ZTC_JOBS:-2}"
running=0
for target in "${TARGETS[@]}"; do
  if ((running >= JOBS)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz.sh: $target for ${SECONDS_EACH}s"
  fuzz_one "$target" &
  running=$((running + 1))
done
wait
status=0
for target in "${TARGETS[@]}"; do
  [[ "$(cat "$WORK/$target.status" 2>/dev/null)" == 0 ]] || status=1
done
exit "$status"
