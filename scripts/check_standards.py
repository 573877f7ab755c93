"""What standard tooling makes of a running mercer: the served /openapi.yaml through
openapi-spec-validator, every example in it against its own schema, and /metrics through
the Prometheus client library's parsers (the text format 0.0.4 by default, OpenMetrics
when Accept asks for it).

    python scripts/check_standards.py http://127.0.0.1:8080

Before checking the service it checks itself: a document with the YAML slip that once
made the spec invalid, and an example that breaks its schema, must both be caught.
"""

import copy
import json
import sys
import urllib.request

import yaml
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate as validate_spec
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus

# Each contract family and its type (the parsers name counters without `_total`).
FAMILIES = {
    "mercer_http_requests": "counter",
    "mercer_http_request_duration_seconds": "histogram",
    "mercer_fit_duration_seconds": "histogram",
    "mercer_fits": "counter",
    "mercer_predict_rows": "counter",
    "mercer_predict_batch_rows": "histogram",
    "mercer_appended_rows": "counter",
    "mercer_append_duration_seconds": "histogram",
    "mercer_searches": "counter",
    "mercer_search_fits": "counter",
    "mercer_fit_queue_depth": "gauge",
    "mercer_fits_running": "gauge",
    "mercer_models": "gauge",
    "mercer_registry_bytes": "gauge",
}


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


def pointer(path):
    return "#/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def examples(node, path=()):
    """(where, instance, path of the schema it must satisfy) for every example."""
    if isinstance(node, dict):
        if "schema" in node:  # a media type or a parameter: its examples meet its schema
            if "example" in node:
                yield pointer(path + ("example",)), node["example"], path + ("schema",)
            for name, ex in (node.get("examples") or {}).items():
                yield pointer(path + ("examples", name)), ex["value"], path + ("schema",)
        elif "example" in node and path[-1:] != ("properties",):  # a schema's own example
            yield pointer(path + ("example",)), node["example"], path
        for k, v in node.items():
            if k not in ("example", "examples"):
                yield from examples(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from examples(v, path + (i,))


def check_examples(spec):
    """Every example against its schema, $refs resolved in the document. Returns errors."""
    errors, count = [], 0
    for where, instance, schema_path in examples(spec):
        count += 1
        # A wrapper that is the whole document: '#/components/...' refs resolve in it.
        wrapper = dict(spec)
        wrapper["$ref"] = pointer(schema_path)
        for e in OAS30Validator(wrapper).iter_errors(instance):
            errors.append(f"{where}: {e.message} (at {'/'.join(map(str, e.absolute_path))})")
    return count, errors


def check_spec_text(text):
    spec = yaml.safe_load(text)
    validate_spec(spec)
    count, errors = check_examples(spec)
    if errors:
        raise AssertionError("examples that break their schemas:\n  " + "\n  ".join(errors))
    return spec, count


def self_test(text):
    broken = text.replace('metadata: {description: "Any JSON, echoed back"}', "metadata: {description: Any JSON, echoed back}")
    assert broken != text, "self-test: the metadata line moved; update the self-test"
    try:
        validate_spec(yaml.safe_load(broken))
    except Exception:
        pass
    else:
        raise AssertionError("self-test: openapi-spec-validator accepted the unquoted description")
    spec = copy.deepcopy(yaml.safe_load(text))
    spec["components"]["schemas"]["Problem"]["example"]["status"] = "422"
    _, errors = check_examples(spec)
    assert errors, "self-test: an example that breaks its schema went unnoticed"


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def check_metrics(base):
    # A fit, a prediction, an append and a search, so that every family has samples.
    model = post(base + "/models", {"model": "kernel_ridge", "x": [[0.0], [1.0]], "y": [0.0, 1.0]})
    post(base + "/models", {"model": "kernel_ridge", "x": [[0.0], [1.0], [2.0], [3.0]], "y": [0.0, 1.0, 0.5, 0.2],
                            "search": {"space": {"/params/lambda": [0.1, 1.0]}, "cv": 2}})
    post(f"{base}/models/{model['id']}/predict", {"x": [[0.5]]})
    post(f"{base}/models/{model['id']}/observations", {"x": [[2.0]], "y": [0.5]})
    ctype, text = get(base + "/metrics")
    assert ctype.startswith("text/plain; version=0.0.4"), f"/metrics default content type {ctype!r}"
    assert "# EOF" not in text
    classic = {f.name: f.type for f in parse_prometheus(text)}
    ctype, text = get(base + "/metrics", "application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text"), f"/metrics OpenMetrics content type {ctype!r}"
    om = {f.name: f.type for f in parse_openmetrics(text)}
    for name, kind in FAMILIES.items():
        assert classic.get(name) == kind, f"text format: {name} is {classic.get(name)!r}, want {kind}"
        assert om.get(name) == kind, f"OpenMetrics: {name} is {om.get(name)!r}, want {kind}"
    return len(classic), len(om)


def main():
    base = sys.argv[1].rstrip("/")
    ctype, text = get(base + "/openapi.yaml")
    self_test(text)
    spec, count = check_spec_text(text)
    print(f"openapi: the served document is valid OpenAPI {spec['openapi']}; {count} examples match their schemas")
    n_classic, n_om = check_metrics(base)
    print(f"metrics: {n_classic} families parsed as Prometheus text, {n_om} as OpenMetrics")


if __name__ == "__main__":
    main()
