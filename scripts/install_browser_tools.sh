#!/usr/bin/env bash
# Installs what scripts/browser_test.py needs, skipping whatever is already there:
# Chromium and its chromedriver (Debian packages), and a venv with Selenium (PyPI).
#   scripts/install_browser_tools.sh
# The venv is ~/.cache/mercer-browser-venv (or $MERCER_BROWSER_VENV); run the test with its
# python: ~/.cache/mercer-browser-venv/bin/python scripts/browser_test.py URL
set -euo pipefail

SELENIUM_VERSION=4.38.0
venv=${MERCER_BROWSER_VENV:-$HOME/.cache/mercer-browser-venv}

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

pkgs=()
command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
[ -x /usr/bin/chromedriver ] || pkgs+=(chromium-driver)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "install_browser_tools: apt-get install ${pkgs[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

if ! "$venv/bin/python" -c "import selenium, sys; sys.exit(selenium.__version__ != '$SELENIUM_VERSION')" 2>/dev/null; then
  echo "install_browser_tools: venv $venv with selenium==$SELENIUM_VERSION"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "selenium==$SELENIUM_VERSION"
fi

echo "install_browser_tools: $(chromium --version 2>/dev/null | head -n 1), $(/usr/bin/chromedriver --version | cut -d' ' -f1-2), selenium $("$venv/bin/python" -c 'import selenium; print(selenium.__version__)')"
