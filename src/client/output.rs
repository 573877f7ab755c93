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
        if !m[key].is_null() {
            let pretty = serde_json::to_string_pretty(&m[key]).unwrap_or_default().replace('\n', "\n  ");
            out.push_str(&format!("{key}:\n  {pretty}\n"));
        }
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
}
