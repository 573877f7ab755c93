#!/usr/bin/env bash
# A soak with chaos: two replicas, s3s-fs and haproxy (scripts/cluster.sh's stack) under
# scripts/soak_load.py's mixed load for SOAK_SECONDS (default 180), replica 2 killed -9
# every 30 s and restarted, the store restarted once; see the --soak section of
# scripts/cluster.sh for what makes it fail.
#
#   SOAK_SECONDS=3600 scripts/soak.sh target/release/mercer
set -euo pipefail
exec "$(dirname "$0")/cluster.sh" --soak "$@"
