#!/usr/bin/env bash
# Set up fmha-workbench in ./.venv on a fresh machine.
#   bash scripts/setup.sh          the app (plus the GPU extra when an NVIDIA GPU is present)
#   bash scripts/setup.sh --test   the app and what the tests need
# On Debian/Ubuntu it first installs the system libraries Qt needs (apt-get, as root or via sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0
[[ ${1:-} == --test ]] && want_tests=1

qt_libs=(libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 fonts-dejavu-core
  libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-randr0 libxcb-render-util0
  libxcb-shape0 libxcb-xkb1 libxcb-xinerama0 libglib2.0-0)
# The tests also build a stand-in libcuda with gcc (tests/test_offline_signature.py).
[[ $want_tests == 1 ]] && qt_libs+=(xvfb xauth gcc)

if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
  missing=()
  for pkg in "${qt_libs[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    sudo=""
    [[ $(id -u) == 0 ]] || sudo="sudo"
    echo "setup: installing system packages (Qt's libraries; for the tests Xvfb and gcc): ${missing[*]}"
    # Wait for another apt (unattended upgrades at boot) rather than fail on its lock.
    lock=(-o DPkg::Lock::Timeout=600)
    $sudo apt-get "${lock[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not a Debian system; make sure Qt's libraries (EGL, GL, xkbcommon, fontconfig) are installed"
fi

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "setup: Python 3.10 or newer is needed (found $("$python" --version 2>&1))" >&2; exit 1; }
[[ -x .venv/bin/python ]] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

extras=()
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  extras+=(gpu)
  echo "setup: NVIDIA GPU found; installing cuda-tile 1.7.0, the 13.4 compilers and CuPy"
fi
[[ $want_tests == 1 ]] && extras+=(test)
spec="."
((${#extras[@]})) && spec=".[$(IFS=,; echo "${extras[*]}")]"
.venv/bin/python -m pip install -q -e "$spec"
echo "setup: done. Start the workbench with .venv/bin/fmha-workbench"
