#!/usr/bin/env bash
# Installs what ztc needs to build and test on Debian 12:
#   1. Debian packages (only when one is missing: apt-get update + install),
#   2. a Python virtual environment at <repo>/.venv (Debian's python3, with
#      --system-site-packages so Debian's python3-torch is visible), into which
#      scripts/python-requirements.txt is pip-installed whenever the
#      requirements changed since the last successful install.
#
# Idempotent; prints nothing when everything is already in place.
# Usage: scripts/setup.sh [--force-pip]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
REQS="$ROOT/scripts/python-requirements.txt"
STAMP="$VENV/.ztc-requirements.sha256"
BASE_PYTHON=/usr/bin/python3

FORCE_PIP=0
for arg in "$@"; do
  case "$arg" in
    --force-pip) FORCE_PIP=1 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  cmake ninja-build ccache g++
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libopenblas-dev libdnnl-dev nlohmann-json3-dev libgtest-dev libssl-dev
  libopenmpi-dev openmpi-bin
  slurmctld slurmd slurm-client munge
  coinor-libcbc-dev pkg-config
  clang-22 libclang-rt-22-dev libomp-22-dev
  python3-venv python3-torch python3-numpy
)

# --- 1. Debian packages ------------------------------------------------------
# One dpkg-query call for all packages; a package that dpkg does not know at
# all is simply absent from the output.
installed="$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PACKAGES[@]}" 2>/dev/null || true)"
missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! grep -qE "^${pkg//+/\\+} [ih]i" <<<"$installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  SUDO=()
  if [[ "$(id -u)" != 0 ]]; then
    SUDO=(sudo)
  fi
  echo "setup.sh: installing Debian packages: ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- 2. Python virtual environment -------------------------------------------
venv_ok() {
  [[ -x "$VENV/bin/python" && -f "$VENV/pyvenv.cfg" ]] || return 1
  grep -qE '^include-system-site-packages *= *true' "$VENV/pyvenv.cfg" || return 1
  grep -qE "^home *= *$(dirname "$BASE_PYTHON")\$" "$VENV/pyvenv.cfg" || return 1
}

if ! venv_ok; then
  echo "setup.sh: creating Python virtual environment in .venv"
  rm -rf "$VENV"
  "$BASE_PYTHON" -m venv --system-site-packages "$VENV"
fi

# The stamp covers the requirements and the venv's Python version.
want="$( { cat "$REQS"; grep -E '^version' "$VENV/pyvenv.cfg" || true; } | sha256sum | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"

if [[ "$FORCE_PIP" == 1 || "$want" != "$have" ]]; then
  echo "setup.sh: installing Python requirements into .venv"
  rm -f "$STAMP"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$REQS"
  # Check that the combination really works (torch 1.13 needs numpy 1.x).
  "$VENV/bin/python" - <<'EOF'
import numpy, torch, onnx, onnxruntime, sklearn
assert numpy.__version__.startswith("1."), numpy.__version__
t = torch.from_numpy(numpy.arange(6, dtype=numpy.float32).reshape(2, 3))
assert float((t @ t.T).sum()) == 83.0
print("setup.sh: torch %s, numpy %s, onnx %s, onnxruntime %s, scikit-learn %s"
      % (torch.__version__, numpy.__version__, onnx.__version__,
         onnxruntime.__version__, sklearn.__version__))
EOF
  echo "$want" >"$STAMP"
fi
