#!/usr/bin/env python3
"""Checks the Grafana dashboard (deploy/grafana/mercer.json) against the service.

    python3 scripts/check_grafana.py [DASHBOARD.json [METRICS.rs]]

The dashboard must be a JSON object with a uid, a title and a schemaVersion; its panels
(rows included, and the panels of collapsed rows) must have unique ids and unique titles;
its templating must hold a Prometheus datasource variable, and every panel's datasource
must name a datasource variable; every `$variable` an expression uses must be defined
(or be one of Grafana's own, such as `$__rate_interval`).

Every metric name in any PromQL expression (the panels' `expr`s and the variables'
queries) must be one the service exposes. The names are read from src/metrics.rs: each
`registry.register("name", "help", field.clone())` call, the field's type taken from
`pub struct Metrics`; a counter is exposed as `name_total`, a histogram as
`name_bucket`, `name_sum` and `name_count`, a gauge as `name`. Label names in selectors
and in `by (...)` clauses must be labels of the metrics used (from the
`#[derive(EncodeLabelSet)]` structs), or the labels Prometheus adds (`instance`, `job`)
or `le` for histogram buckets.

Exits 0 with a summary when everything holds; otherwise prints every problem found and
exits 1 (2 when a file cannot be read at all). Python 3 standard library only.
"""

import difflib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "mercer.json"
METRICS_RS = ROOT / "src" / "metrics.rs"

# Labels every scraped series has, whatever the service exports.
TARGET_LABELS = {"instance", "job"}
# Grafana's built-in variables.
BUILTIN_VARIABLES = {
    "__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
    "__dashboard", "__from", "__to", "__name", "__org", "__user", "timeFilter", "__timeFilter",
}
PROMQL_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "inf", "nan", "atan2",
}


class Failure(Exception):
    """A problem that stops the check before it can look further."""


# ---------------------------------------------------------------------------- metrics.rs

def read_registry(path):
    """{exposed name: set of label names}, and the registered families for the summary."""
    try:
        src = path.read_text(encoding="utf-8")
    except OSError as e:
        raise Failure(f"cannot read {path}: {e}")
    code = strip_rust_comments(src)

    # Label sets: #[derive(..., EncodeLabelSet)] pub struct Name { pub a: T, ... }
    label_sets = {}
    for m in re.finditer(r"#\[derive\(([^)]*)\)\]\s*pub struct (\w+)\s*\{([^}]*)\}", code):
        if "EncodeLabelSet" in m.group(1):
            label_sets[m.group(2)] = set(re.findall(r"pub\s+(\w+)\s*:", m.group(3)))

    # Field types of `pub struct Metrics { ... }`.
    m = re.search(r"pub struct Metrics\s*\{(.*?)\n\}", code, re.S)
    if not m:
        raise Failure(f"{path}: no `pub struct Metrics {{ ... }}` to read the metric types from")
    fields = {}
    for f in re.finditer(r"^\s*pub\s+(\w+)\s*:\s*(.+?)\s*,\s*$", m.group(1), re.M):
        fields[f.group(1)] = f.group(2).strip()

    def kind_and_labels(name, ty):
        h = re.fullmatch(r"HistogramFamily<\s*(\w+)\s*>", ty)
        if h:
            return "histogram", labels_of(h.group(1), name)
        f = re.fullmatch(r"Family<\s*(\w+)\s*,\s*(\w+)\s*(?:,.*)?>", ty)
        if f:
            return kind_of(f.group(2), name), labels_of(f.group(1), name)
        return kind_of(ty, name), set()

    def labels_of(struct, name):
        if struct not in label_sets:
            raise Failure(f"{path}: `{name}` is labelled by `{struct}`, which is not an EncodeLabelSet struct here")
        return label_sets[struct]

    def kind_of(ty, name):
        kinds = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram"}
        if ty not in kinds:
            raise Failure(f"{path}: cannot tell the metric type of `{name}` from its type `{ty}`")
        return kinds[ty]

    # registry.register("name", "help (may hold escapes and line continuations)", field.clone())
    call = re.compile(
        r"registry\s*\.\s*register\s*\(\s*\"([^\"]+)\"\s*,\s*\"(?:[^\"\\]|\\.)*\"\s*,\s*(\w+)\s*\.\s*clone\s*\(\s*\)\s*,?\s*\)",
        re.S,
    )
    registered = {}
    for m in call.finditer(code):
        name, field = m.group(1), m.group(2)
        if field not in fields:
            raise Failure(f"{path}: `{name}` registers `{field}`, which is not a field of `pub struct Metrics`")
        if name in registered:
            raise Failure(f"{path}: `{name}` is registered twice")
        registered[name] = kind_and_labels(name, fields[field])
    calls = len(re.findall(r"registry\s*\.\s*register\w*\s*\(", code))
    if calls != len(registered):
        raise Failure(
            f"{path}: {calls} registry.register calls but only {len(registered)} could be read "
            "(expected `registry.register(\"name\", \"help\", field.clone())`)"
        )
    if not registered:
        raise Failure(f"{path}: no registry.register(\"name\", ...) calls found")

    exposed, family_of = {}, {}
    for name, (kind, labels) in registered.items():
        if kind == "counter":
            series = {f"{name}_total": set(labels)}
        elif kind == "histogram":
            series = {f"{name}_bucket": set(labels) | {"le"}, f"{name}_sum": set(labels), f"{name}_count": set(labels)}
        else:
            series = {name: set(labels)}
        exposed.update(series)
        family_of.update((s, name) for s in series)
    return exposed, registered, family_of


def strip_rust_comments(src):
    """The source without // and /* */ comments; string, raw string and char literals are
    kept as they are (a `"` inside `'"'` or a `//` inside a string starts nothing)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        raw = re.match(r'r(#*)"', src[i:]) if c == "r" and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")) else None
        if raw:
            close = '"' + raw.group(1)
            j = src.find(close, i + len(raw.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(src[i:j])
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), which has no closing quote.
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", src[i:])
            j = i + (len(m.group(0)) if m else 1)
            out.append(src[i:j])
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# ---------------------------------------------------------------------------- PromQL

def promql_names(expr):
    """(metric names, [(metric or None, label names in its matchers)], by-clause labels,
    variables) of one PromQL expression, as far as a dashboard's expressions need."""
    variables = set(re.findall(r"\$\{?(\w+)", expr))
    # String literals hold label values and variables, never metric names.
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    # Ranges, subqueries and offsets in brackets: [5m], [$__rate_interval], [1h:5m].
    text = re.sub(r"\[[^\]]*\]", " ", text)
    grouping = set()

    def take_grouping(m):
        grouping.update(x for x in re.split(r"[\s,]+", m.group(2)) if x)
        return " "

    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", take_grouping, text)
    selectors = []

    def take_selector(m):
        labels = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2)))
        selectors.append((m.group(1), labels))
        return f" {m.group(1) or ''} "

    text = re.sub(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^{}]*)\}", take_selector, text)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([A-Za-z_:][A-Za-z0-9_:]*)(?![\w:])", text):
        word = m.group(1)
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in PROMQL_KEYWORDS:
            continue  # a function, an aggregation or an operator
        names.add(word)
    return names, selectors, grouping, variables


def label_values_metric(query):
    """The metric of a `label_values(metric, label)` variable query (None for other forms)."""
    m = re.fullmatch(r"\s*label_values\s*\(\s*(.+?)\s*,\s*([A-Za-z_]\w*)\s*\)\s*", query)
    if not m:
        return None
    return m.group(1), m.group(2)


# ---------------------------------------------------------------------------- dashboard

def all_panels(panels, where="panels"):
    """Every panel, rows and the panels inside rows included, with where it sits."""
    out = []
    for i, p in enumerate(panels):
        at = f"{where}[{i}]"
        out.append((at, p))
        if isinstance(p, dict) and isinstance(p.get("panels"), list):
            out.extend(all_panels(p["panels"], f"{at}.panels"))
    return out


def check(dashboard_path, metrics_path):
    exposed, registered, family_of = read_registry(metrics_path)
    try:
        text = dashboard_path.read_text(encoding="utf-8")
    except OSError as e:
        raise Failure(f"cannot read {dashboard_path}: {e}")
    try:
        board = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(f"{dashboard_path} is not valid JSON: {e}")
    if not isinstance(board, dict):
        raise Failure(f"{dashboard_path}: the dashboard must be a JSON object")

    problems = []
    for key, kind in [("uid", str), ("title", str), ("schemaVersion", int)]:
        if not isinstance(board.get(key), kind) or board.get(key) in ("", None):
            problems.append(f"dashboard: `{key}` is missing or not a {kind.__name__}")

    # Templating: variables by name; a Prometheus datasource variable among them.
    variables = {}
    templating = board.get("templating")
    templating = templating.get("list", []) if isinstance(templating, dict) else templating
    if not isinstance(templating, list):
        problems.append("templating.list is not a list")
        templating = []
    for i, v in enumerate(templating):
        if not isinstance(v, dict) or not v.get("name"):
            problems.append(f"templating.list[{i}] has no name")
            continue
        if v["name"] in variables:
            problems.append(f"templating: variable `{v['name']}` is defined twice")
        variables[v["name"]] = v
    datasource_vars = {n for n, v in variables.items() if v.get("type") == "datasource"}
    declared = board.get("__inputs")
    declared = declared if isinstance(declared, list) else []
    inputs = {i.get("name") for i in declared if isinstance(i, dict) and i.get("type") == "datasource"}
    if not any(variables[n].get("query") == "prometheus" for n in datasource_vars) and not inputs:
        problems.append("templating: no datasource variable of type prometheus (e.g. DS_PROMETHEUS)")
    datasource_names = datasource_vars | inputs

    def datasource_ok(ds, at):
        if not isinstance(ds, dict) or ds.get("type") != "prometheus":
            problems.append(f"{at}: datasource must be {{\"type\": \"prometheus\", \"uid\": \"${{DS_PROMETHEUS}}\"}}, not {ds!r}")
            return
        ref = re.fullmatch(r"\$\{?(\w+)\}?", str(ds.get("uid", "")))
        if not ref or ref.group(1) not in datasource_names:
            problems.append(f"{at}: datasource uid {ds.get('uid')!r} is not a datasource variable ({sorted(datasource_names)})")

    used_metrics = set()

    def check_expr(expr, at):
        names, selectors, grouping, used_vars = promql_names(expr)
        if not names:
            problems.append(f"{at}: the expression uses no metric: {expr}")
        unknown = sorted(names - set(exposed))
        for name in unknown:
            hint = [n for n in exposed if n.startswith(name) or name.startswith(n)]
            hint = hint or difflib.get_close_matches(name, list(exposed), n=3)
            problems.append(
                f"{at}: metric `{name}` is not exposed by the service"
                + (f" (did you mean {', '.join(sorted(hint))}?)" if hint else "")
            )
        used_metrics.update(names & set(exposed))
        known = set().union(*(exposed[n] for n in names if n in exposed)) if names else set()
        for metric, labels in selectors:
            allowed = (exposed.get(metric, set()) if metric else known) | TARGET_LABELS
            for label in sorted(labels - allowed):
                problems.append(f"{at}: `{metric or 'selector'}` has no label `{label}` (labels: {sorted(allowed)})")
        for label in sorted(grouping - (known | TARGET_LABELS)):
            problems.append(f"{at}: grouping by `{label}`, which none of {sorted(names)} has")
        for var in sorted(used_vars - set(variables) - BUILTIN_VARIABLES):
            problems.append(f"{at}: variable `${var}` is not defined in templating")

    for name, v in variables.items():
        at = f"templating `{name}`"
        if v.get("type") != "query":
            continue
        datasource_ok(v.get("datasource"), at)
        q = v.get("query")
        query = q.get("query", "") if isinstance(q, dict) else (q or "")
        lv = label_values_metric(query)
        if re.fullmatch(r"\s*label_values\s*\(\s*[A-Za-z_]\w*\s*\)\s*", query):
            pass  # label_values(label): the values of a label over every series, no metric
        elif lv:
            metric, label = lv
            check_expr(metric, at)
            names = promql_names(metric)[0]
            if names and label not in set().union(*(exposed.get(n, set()) for n in names)) | TARGET_LABELS:
                problems.append(f"{at}: label_values of `{label}`, which {sorted(names)} does not have")
        elif query:
            check_expr(query, at)
        else:
            problems.append(f"{at}: a query variable without a query")

    panels = board.get("panels")
    if not isinstance(panels, list) or not panels:
        problems.append("dashboard: no panels")
        panels = []
    ids, titles = {}, {}
    n_queries = 0
    for at, p in all_panels(panels):
        if not isinstance(p, dict):
            problems.append(f"{at}: not an object")
            continue
        title = p.get("title")
        label = f"{at} ({title!r})"
        pid = p.get("id")
        if not isinstance(pid, int) or isinstance(pid, bool):
            problems.append(f"{label}: `id` must be an integer")
        elif pid in ids:
            problems.append(f"{label}: id {pid} is also the id of {ids[pid]}")
        else:
            ids[pid] = label
        if not isinstance(title, str) or not title.strip():
            problems.append(f"{at}: no title")
        elif title in titles:
            problems.append(f"{label}: the title is also that of {titles[title]}")
        else:
            titles[title] = at
        grid = p.get("gridPos")
        grid = grid if isinstance(grid, dict) else {}
        if not all(isinstance(grid.get(k), int) for k in ("h", "w", "x", "y")):
            problems.append(f"{label}: gridPos needs integer h, w, x and y")
        elif grid["x"] + grid["w"] > 24:
            problems.append(f"{label}: gridPos x + w is {grid['x'] + grid['w']}, over the 24 columns")
        if p.get("type") == "row":
            continue
        datasource_ok(p.get("datasource"), label)
        targets = p.get("targets")
        if not isinstance(targets, list) or not targets:
            problems.append(f"{label}: no targets")
            continue
        refs = set()
        for j, t in enumerate(targets):
            tat = f"{label}.targets[{j}]"
            if not isinstance(t, dict):
                problems.append(f"{tat}: not an object")
                continue
            if t.get("refId") in refs:
                problems.append(f"{tat}: refId {t.get('refId')!r} is used twice in the panel")
            refs.add(t.get("refId"))
            if "datasource" in t:
                datasource_ok(t["datasource"], tat)
            expr = t.get("expr")
            if not isinstance(expr, str) or not expr.strip():
                problems.append(f"{tat}: no expr")
                continue
            n_queries += 1
            check_expr(expr, tat)
    if "instance" not in variables:
        problems.append("templating: no `instance` variable")
    return problems, {
        "families": len(registered),
        "exposed": len(exposed),
        "panels": len([p for _, p in all_panels(panels) if isinstance(p, dict) and p.get("type") != "row"]),
        "rows": len([p for _, p in all_panels(panels) if isinstance(p, dict) and p.get("type") == "row"]),
        "queries": n_queries,
        "used": sorted(used_metrics),
        "uncharted": sorted(set(registered) - {family_of[m] for m in used_metrics}),
    }


def main(argv):
    dashboard = Path(argv[1]) if len(argv) > 1 else DASHBOARD
    metrics = Path(argv[2]) if len(argv) > 2 else METRICS_RS
    try:
        problems, summary = check(dashboard, metrics)
    except Failure as e:
        print(f"check_grafana: {e}", file=sys.stderr)
        return 2
    if problems:
        print(f"check_grafana: {dashboard}: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print(
        f"check_grafana: {dashboard} is valid: {summary['panels']} panels in {summary['rows']} rows, "
        f"{summary['queries']} queries; they use {len(summary['used'])} of the {summary['exposed']} series names "
        f"of the {summary['families']} metric families registered in {metrics}, all of which exist"
    )
    if summary["uncharted"]:
        print(f"check_grafana: families no panel charts (fine, but maybe worth a panel): {', '.join(summary['uncharted'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
