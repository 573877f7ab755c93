#!/usr/bin/env bash
# Validates the Kubernetes manifests offline: each one against the bundled JSON schemas of
# a Kubernetes release in strict mode (unknown fields are errors), then checks that
# kustomization.yaml lists every manifest and that the Deployment keeps its probes and
# hardening. Needs python3 and PyPI (once: the venv is cached and reused).
#   scripts/validate_k8s.sh [DIR]        DIR defaults to deploy/kubernetes
#   K8S_VERSION=1.33.0 scripts/validate_k8s.sh   (kubernetes-validate 1.37.0 bundles 1.25.0 .. 1.37.0)
set -euo pipefail
KV_VERSION=1.37.0
K8S_VERSION=${K8S_VERSION:-1.37.0}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/deploy/kubernetes}
venv=${MERCER_K8S_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mercer-k8s-venv}
fail() { echo "validate_k8s: FAIL: $*" >&2; exit 1; }

[ -d "$dir" ] || fail "no directory $dir"
[ -f "$dir/kustomization.yaml" ] || fail "no $dir/kustomization.yaml"

if [ "$("$venv/bin/kubernetes-validate" --version 2>/dev/null || true)" != "$KV_VERSION" ]; then
  echo "validate_k8s: installing kubernetes-validate==$KV_VERSION into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi
kv="$venv/bin/kubernetes-validate"
echo "validate_k8s: kubernetes-validate $("$kv" --version), schemas of Kubernetes $K8S_VERSION (strict)"

shopt -s nullglob
manifests=()
for f in "$dir"/*.yaml "$dir"/*.yml; do
  [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")
done
[ ${#manifests[@]} -gt 0 ] || fail "no manifests in $dir"

# kubernetes-validate exits 0 on a kind it has no schema for (a misspelled kind or
# apiVersion: only a WARN) and on a file with no document: so any line but
# "INFO ... passed" fails, and every file must have passed at least one resource.
bad=0
for f in "${manifests[@]}"; do
  status=0
  out=$("$kv" --strict -k "$K8S_VERSION" "$f" 2>&1) || status=$?
  [ -n "$out" ] && printf '%s\n' "$out"
  if [ "$status" -ne 0 ] || grep -qv '^INFO .* passed for resource ' <<<"$out" \
    || ! grep -q ' passed for resource ' <<<"$out"; then
    echo "validate_k8s: INVALID: $(basename "$f") (exit $status)" >&2
    bad=1
  fi
done
[ "$bad" -eq 0 ] || fail "schema validation"

"$venv/bin/python" - "$dir" <<'PY'
import pathlib, sys
import yaml

d = pathlib.Path(sys.argv[1])
errors = []

kust = yaml.safe_load((d / "kustomization.yaml").read_text()) or {}
listed = set(kust.get("resources") or [])
present = {p.name for p in d.iterdir() if p.suffix in (".yaml", ".yml") and p.name != "kustomization.yaml"}
for name in sorted(present - listed):
    errors.append(f"kustomization.yaml does not list {name}")
for name in sorted(listed - present):
    errors.append(f"kustomization.yaml lists {name}, which is not in {d}")

deployments = []
for name in sorted(present):
    for doc in yaml.safe_load_all((d / name).read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "Deployment":
            deployments.append((name, doc))
if not deployments:
    errors.append("no Deployment found")
for name, dep in deployments:
    where = f"{name}: Deployment {dep.get('metadata', {}).get('name')}"
    pod = dep.get("spec", {}).get("template", {}).get("spec", {})
    pod_sc = pod.get("securityContext") or {}
    containers = pod.get("containers") or []
    if not containers:
        errors.append(f"{where}: no containers")
    for c in containers:
        cw = f"{where}, container {c.get('name')}"
        sc = c.get("securityContext") or {}
        for probe in ("livenessProbe", "readinessProbe"):
            if not c.get(probe):
                errors.append(f"{cw}: no {probe}")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            errors.append(f"{cw}: runAsNonRoot is not true")
        if sc.get("readOnlyRootFilesystem") is not True:
            errors.append(f"{cw}: readOnlyRootFilesystem is not true")

for e in errors:
    print(f"validate_k8s: {e}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"validate_k8s: kustomization lists all {len(present)} manifests; "
      f"{len(deployments)} Deployment(s) have liveness and readiness probes, runAsNonRoot, readOnlyRootFilesystem")
PY
echo "validate_k8s: OK (${#manifests[@]} manifests)"
