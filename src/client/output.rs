//! What the client prints for people: aligned tables, and a model's details.

use serde_json::Value;

/// Columns padded to their widest cell; the last column is not padded.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let last = cells.len() - 1;
        let mut s = String::new();
        for (i, (cell, w)) in cells.into_iter().zip(&widths).enumerate() {
            if i == last {
                s.push_str(&cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = w));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        // Several target columns: a,b.
        Value::Array(items) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

/// A kernel as a short expression: product(constant, rbf).
pub fn kernel_summary(k: &Value) -> String {
    let ty = k["type"].as_str().unwrap_or("?");
    match (ty, &k["kernels"], &k["kernel"]) {
        (_, Value::Array(parts), _) => {
            format!("{ty}({})", parts.iter().map(kernel_summary).collect::<Vec<_>>().join(", "))
        }
        ("scale", _, inner) if inner.is_object() => format!("scale({})", kernel_summary(inner)),
        _ => ty.to_string(),
    }
}

pub fn model_table(models: &[Value]) -> String {
    let rows = models
        .iter()
        .map(|m| {
            vec![
                text(&m["id"]),
                text(&m["name"]),
                text(&m["model"]),
                text(&m["status"]),
                kernel_summary(&m["kernel"]),
                text(&m["n_train"]),
                m["training"]["duration_ms"].as_f64().map_or("-".into(), |v| format!("{v:.1}")),
            ]
        })
        .collect();
    table(&["ID", "NAME", "MODEL", "STATUS", "KERNEL", "N", "FIT MS"], rows)
}

/// `mercer kinds`: each kind's task, whether it takes a target, and what it can do.
pub fn kind_table(kinds: &[Value]) -> String {
    const CAPABILITIES: [&str; 8] = [
        "several_outputs",
        "appends",
        "nystrom",
        "variational",
        "probabilities",
        "posterior",
        "transform",
        "precomputed_kernel",
    ];
    let rows = kinds
        .iter()
        .map(|k| {
            let can: Vec<&str> = CAPABILITIES.into_iter().filter(|c| k[*c] == true).collect();
            vec![
                text(&k["name"]),
                text(&k["task"]),
                if k["targets"] == true { "y".into() } else { "-".into() },
                if can.is_empty() { "-".into() } else { can.join(", ") },
            ]
        })
        .collect();
    table(&["MODEL", "TASK", "TARGET", "CAN"], rows)
}

pub fn dataset_table(datasets: &[Value]) -> String {
    let rows = datasets
        .iter()
        .map(|d| {
            vec![
                text(&d["id"]),
                text(&d["name"]),
                text(&d["n_rows"]),
                text(&d["n_features"]),
                text(&d["target"]),
                text(&d["target_kind"]),
                text(&d["created_at"]),
            ]
        })
        .collect();
    table(&["ID", "NAME", "ROWS", "FEATURES", "TARGET", "KIND", "CREATED"], rows)
}

/// A model's resource for reading: the facts, then the kernel, params and training
/// report as indented JSON.
pub fn model_details(m: &Value) -> String {
    let mut out = String::new();
    for key in [
        "id",
        "name",
        "model",
        "task",
        "status",
        "version",
        "n_train",
        "n_features",
        "n_support",
        "classes",
        "created_at",
    ] {
        out.push_str(&format!("{key:<11} {}\n", text(&m[key])));
    }
    for key in ["kernel", "params", "training", "metadata", "error"] {
        let mut value = m[key].clone();
        if key == "training" {
            // The search's candidates are a table of their own, below.
            if let Some(t) = value.as_object_mut() {
                t.remove("search");
            }
        }
        if !value.is_null() {
            let pretty = serde_json::to_string_pretty(&value).unwrap_or_default().replace('\n', "\n  ");
            out.push_str(&format!("{key}:\n  {pretty}\n"));
        }
    }
    if let Some(search) = m["training"].get("search") {
        out.push_str(&search_summary(search));
    }
    out
}

/// Candidates shown by `show`, best first.
const SEARCH_ROWS: usize = 15;

/// A model search: its settings, then the candidates ranked by mean score (failed ones
/// last, ties to the earlier), at most [`SEARCH_ROWS`] of them.
pub fn search_summary(s: &Value) -> String {
    let mut out = format!(
        "search:\n  {} search, cv {}, scoring {}: {} candidates, {} fold fits; best {} (mean {})\n",
        text(&s["method"]),
        text(&s["cv"]),
        text(&s["scoring"]),
        text(&s["n_candidates"]),
        text(&s["n_fits"]),
        text(&s["best_index"]),
        text(&s["best_score"]),
    );
    let candidates = s["candidates"].as_array().cloned().unwrap_or_default();
    let mut ranked: Vec<usize> = (0..candidates.len()).collect();
    let mean = |i: usize| candidates[i]["mean_score"].as_f64();
    ranked.sort_by(|&a, &b| match (mean(a), mean(b)) {
        (Some(x), Some(y)) => y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(&b),
    });
    let pointers: Vec<String> =
        candidates.first().and_then(|c| c["values"].as_object()).map_or_else(Vec::new, |v| v.keys().cloned().collect());
    let mut header = vec!["RANK", "#"];
    header.extend(pointers.iter().map(String::as_str));
    header.extend(["MEAN", "STD", "FIT MS"]);
    let number = |v: &Value| v.as_f64().map_or_else(|| text(v), |x| format!("{x:.6}"));
    let rows = ranked
        .iter()
        .take(SEARCH_ROWS)
        .enumerate()
        .map(|(r, &i)| {
            let c = &candidates[i];
            let mut row = vec![(r + 1).to_string(), i.to_string()];
            row.extend(pointers.iter().map(|p| match &c["values"][p] {
                Value::Object(_) if c["values"][p]["type"].is_string() => kernel_summary(&c["values"][p]),
                v => text(v),
            }));
            row.extend([
                number(&c["mean_score"]),
                number(&c["std_score"]),
                c["fit_ms"].as_f64().map_or("-".into(), |v| format!("{v:.1}")),
            ]);
            row
        })
        .collect();
    for line in table(&header, rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    if candidates.len() > SEARCH_ROWS {
        out.push_str(&format!("  ... {} more\n", candidates.len() - SEARCH_ROWS));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_and_kernels_read_as_expressions() {
        let k = json!({"type": "sum", "kernels": [{"type": "product", "kernels": [{"type": "constant"}, {"type": "rbf"}]}, {"type": "white"}]});
        assert_eq!(kernel_summary(&k), "sum(product(constant, rbf), white)");
        let t = table(&["A", "LONGER"], vec![vec!["xyz".into(), "1".into()], vec!["é".into(), "22".into()]]);
        assert_eq!(t, "A    LONGER\nxyz  1\né    22\n");
    }

    #[test]
    fn search_candidates_are_ranked_best_first_failed_last() {
        let s = json!({"method": "grid", "cv": 3, "scoring": "r2", "n_candidates": 3, "n_fits": 9, "best_index": 2,
            "best_score": 0.9, "candidates": [
                {"values": {"/params/lambda": 1}, "mean_score": 0.5, "std_score": 0.1, "fit_ms": 2.0},
                {"values": {"/params/lambda": 2}, "mean_score": null, "std_score": null, "fit_ms": 1.0},
                {"values": {"/params/lambda": 3}, "mean_score": 0.9, "std_score": 0.0, "fit_ms": 3.0}]});
        let out = search_summary(&s);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[2].contains("RANK") && lines[2].contains("/params/lambda"), "{out}");
        assert!(lines[3].trim_start().starts_with("1     2"), "{out}");
        assert!(lines[4].trim_start().starts_with("2     0"), "{out}");
        assert!(lines[5].contains('-') && lines[5].trim_start().starts_with("3     1"), "{out}");
    }
}
