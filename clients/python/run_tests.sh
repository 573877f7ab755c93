#!/usr/bin/env bash
# Builds the Python client's wheel and tests that wheel against a real mercer binary:
#   clients/python/run_tests.sh [MERCER_BINARY] [PYTEST_ARGS...]
# The binary defaults to this repository's target/release/mercer. A virtualenv at
# $MERCER_CLIENT_VENV (default ~/.cache/mercer-client-venv) is created on first use and
# kept; every run builds the wheel with `pip wheel --no-deps` from a clean copy of the
# package's sources, installs that wheel (with its test extra) in the virtualenv in
# place of any earlier one, checks that the package imported is the installed wheel's,
# and runs pytest on tests/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
binary="${1:-$here/../../target/release/mercer}"
if [ ! -x "$binary" ]; then
    echo "run_tests.sh: no mercer binary at $binary (cargo build --release, or pass its path)" >&2
    exit 2
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"

venv="${MERCER_CLIENT_VENV:-$HOME/.cache/mercer-client-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
python="$venv/bin/python"
pip=("$python" -m pip --disable-pip-version-check)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The sources only: a build/ or *.egg-info left in the tree by an earlier in-tree build
# would otherwise leak stale files into the wheel.
mkdir "$work/source"
tar -C "$here" --exclude=__pycache__ --exclude='*.egg-info' -cf - pyproject.toml README.md src \
    | tar -C "$work/source" -xf -
"${pip[@]}" wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/source"
wheels=("$work"/dist/mercer_client-*.whl)
if [ "${#wheels[@]}" != 1 ] || [ ! -f "${wheels[0]}" ]; then
    echo "run_tests.sh: pip wheel made ${wheels[*]}, not one mercer_client wheel" >&2
    exit 1
fi
wheel="${wheels[0]}"
echo "run_tests.sh: built $(basename "$wheel")"

"${pip[@]}" uninstall --quiet --yes mercer-client 2>/dev/null || true
"${pip[@]}" install --quiet "$wheel[test]"

# From a directory without the sources: the package must be the one the wheel installed.
(cd "$work" && "$python" - "$wheel" <<'EOF'
import importlib.metadata, os, sys, sysconfig
import mercer_client

wheel = os.path.basename(sys.argv[1])
site = os.path.realpath(sysconfig.get_paths()["purelib"])
where = os.path.realpath(mercer_client.__file__)
installed = importlib.metadata.version("mercer-client")
assert where.startswith(site + os.sep), f"mercer_client imported from {where}, not from {site}"
assert wheel.startswith(f"mercer_client-{installed}-"), f"{wheel} is not the installed version {installed}"
assert mercer_client.__version__ == installed, (mercer_client.__version__, installed)
EOF
)

cd "$here"
MERCER_BIN="$binary" "$python" -m pytest -p no:cacheprovider tests "${@:2}"
