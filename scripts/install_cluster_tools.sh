#!/usr/bin/env bash
# Installs what scripts/cluster.sh needs, skipping whatever is already there:
# haproxy, wrk, jq, curl (Debian packages) and s3s-fs (the S3-compatible store, from crates.io).
#   scripts/install_cluster_tools.sh
# s3s-fs lands in ~/.cargo/bin (or $CARGO_HOME/bin), which must be on PATH for cluster.sh.
set -euo pipefail

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

pkgs=()
for tool in haproxy wrk jq curl; do
  command -v "$tool" >/dev/null 2>&1 || pkgs+=("$tool")   # each tool's Debian package has its name
done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "install_cluster_tools: apt-get install ${pkgs[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
fi

cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
if ! command -v s3s-fs >/dev/null 2>&1 && [ ! -x "$cargo_bin/s3s-fs" ]; then
  echo "install_cluster_tools: cargo install s3s-fs@0.14.1 (a couple of minutes)"
  cargo install s3s-fs@0.14.1 --features binary --locked
fi
if ! command -v s3s-fs >/dev/null 2>&1; then
  echo "install_cluster_tools: note: s3s-fs is in $cargo_bin, which is not on PATH" >&2
fi

echo "install_cluster_tools: $(haproxy -v | head -n 1)"
echo "install_cluster_tools: $(wrk --version 2>&1 | head -n 1)"
echo "install_cluster_tools: $(jq --version), $(curl --version | head -n 1 | cut -d' ' -f1-2), s3s-fs $("$(command -v s3s-fs || echo "$cargo_bin/s3s-fs")" --version | awk '{print $NF}')"
