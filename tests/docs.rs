//! The user documentation keeps up with the spec: every operation of openapi.yaml is
//! documented in docs/api.md (written as "`METHOD /path`", e.g. "`POST /models/{id}/predict`"),
//! so is every model kind of the spec's model enum (written as "`kind`"), and neither the
//! README, the spec nor any document under docs/ points outside the repository.

mod common;

use common::spec_operations;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Strings that name documents outside the repository.
const FORBIDDEN: [&str; 2] = ["../shared", "API.md"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The items of a YAML flow list (`[a, b, "c"]`), nulls left out.
fn flow_list(text: &str) -> Vec<String> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    inner
        .split(',')
        .map(|item| item.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|item| !item.is_empty() && item != "null" && item != "~")
        .collect()
}

/// The `enum` of the schema block that starts at `lines[start]`: the first `enum:` among
/// the lines indented deeper than the block's first line, in flow style (possibly over
/// several lines) or block style (`- item` lines).
fn enum_in_block(lines: &[&str], start: usize) -> Option<Vec<String>> {
    let depth = indentation(lines[start]);
    let block = lines[start + 1..].iter().take_while(|l| l.trim().is_empty() || indentation(l) > depth);
    let block: Vec<&str> = block.copied().collect();
    let at = block.iter().position(|l| l.trim_start().starts_with("enum:"))?;
    let rest = block[at].trim_start().strip_prefix("enum:")?.trim();
    if rest.starts_with('[') {
        let mut text = rest.to_string();
        let mut next = at + 1;
        while !text.contains(']') && next < block.len() {
            text.push(' ');
            text.push_str(block[next].trim());
            next += 1;
        }
        let text = &text[..=text.find(']')?];
        return Some(flow_list(text));
    }
    let items = block[at + 1..]
        .iter()
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(|item| item.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|item| item != "null" && item != "~")
        .collect();
    Some(items)
}

/// The model kinds of the spec: the enum of the schema that the request body's `model`
/// property refers to (`model: {$ref: "#/components/schemas/ModelName"}`), or the enum
/// written inline in that property.
fn spec_model_kinds(spec: &str) -> Vec<String> {
    let lines: Vec<&str> = spec.lines().collect();
    let model_props: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].trim_start().starts_with("model:")).collect();
    assert!(!model_props.is_empty(), "openapi.yaml has no `model:` property");
    let refs: BTreeSet<String> = model_props
        .iter()
        .filter_map(|&i| {
            let (_, after) = lines[i].split_once("#/components/schemas/")?;
            Some(after.split(|c: char| c == '"' || c == '\'' || c == '}' || c.is_whitespace()).next()?.to_string())
        })
        .collect();
    let kinds = match refs.len() {
        0 => {
            // An inline enum: `model: {type: string, enum: [...]}` or a block under `model:`.
            let i = model_props[0];
            match lines[i].split_once("enum:") {
                Some((_, after)) => Some(flow_list(&after[..=after.find(']').expect("a closed enum list")])),
                None => enum_in_block(&lines, i),
            }
        }
        1 => {
            let name = refs.iter().next().expect("one schema");
            let header = format!("{name}:");
            let start = (0..lines.len())
                .find(|&i| lines[i].trim() == header && indentation(lines[i]) >= 4)
                .unwrap_or_else(|| panic!("openapi.yaml: the `model` property refers to schema {name}, not found"));
            enum_in_block(&lines, start)
        }
        _ => panic!("openapi.yaml: `model` properties refer to several schemas: {refs:?}"),
    };
    let kinds = kinds.unwrap_or_else(|| panic!("openapi.yaml: no `enum:` for the model kinds (schemas {refs:?})"));
    for k in &kinds {
        assert!(
            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "openapi.yaml: `{k}` does not look like a model kind: {kinds:?}"
        );
    }
    kinds
}

#[test]
fn every_operation_of_the_spec_is_documented() {
    let spec = read("openapi.yaml");
    let doc = read("docs/api.md");
    let operations = spec_operations(&spec);
    assert!(operations.len() >= 9, "openapi.yaml's paths parsed: {operations:?}");
    let missing: Vec<String> = operations
        .iter()
        .map(|(method, path)| format!("`{method} {path}`"))
        .filter(|written| !doc.contains(written.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/api.md does not document these operations of openapi.yaml (write each as \"`METHOD /path`\"): {}",
        missing.join(", ")
    );
}

#[test]
fn every_model_kind_of_the_spec_is_documented() {
    let spec = read("openapi.yaml");
    let doc = read("docs/api.md");
    let kinds = spec_model_kinds(&spec);
    assert!(kinds.len() >= 2, "openapi.yaml's model enum parsed: {kinds:?}");
    assert!(kinds.iter().any(|k| k == "kernel_ridge"), "openapi.yaml's model enum parsed: {kinds:?}");
    let missing: Vec<&String> = kinds.iter().filter(|k| !doc.contains(&format!("`{k}`"))).collect();
    assert!(
        missing.is_empty(),
        "docs/api.md does not document these model kinds of openapi.yaml (write each as \"`kind`\"): {missing:?}"
    );
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())).path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The 1-based line numbers of `needle` in `bytes`.
fn lines_with(bytes: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut found = Vec::new();
    for (i, window) in bytes.windows(needle.len()).enumerate() {
        if window == needle {
            found.push(1 + bytes[..i].iter().filter(|&&b| b == b'\n').count());
        }
    }
    found
}

#[test]
fn the_documents_refer_to_nothing_outside_the_repository() {
    let mut files = vec![root().join("README.md"), root().join("openapi.yaml")];
    let docs = root().join("docs");
    files_under(&docs, &mut files);
    assert!(files.contains(&docs.join("api.md")), "docs/api.md exists: {files:?}");
    let mut found = Vec::new();
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        for needle in FORBIDDEN {
            for line in lines_with(&bytes, needle.as_bytes()) {
                let shown = file.strip_prefix(root()).unwrap_or(file).display().to_string();
                found.push(format!("{shown}:{line} mentions `{needle}`"));
            }
        }
    }
    assert!(found.is_empty(), "the documents must describe the repository itself:\n{}", found.join("\n"));
}

#[test]
fn the_spec_readers_read_what_they_should() {
    let spec = "openapi: 3.0.3\npaths:\n  /a/{id}:\n    parameters:\n      - x\n    get:\n      summary: s\n    delete:\n      summary: s\ncomponents:\n  schemas:\n    Body:\n      properties:\n        model: {$ref: \"#/components/schemas/Kind\"}\n    Kind:\n      type: string\n      enum: [alpha_1, beta,\n             gamma, null]\n      description: x\n";
    let ops: Vec<(String, String)> = spec_operations(spec).into_iter().collect();
    assert_eq!(ops, [("DELETE".to_string(), "/a/{id}".to_string()), ("GET".to_string(), "/a/{id}".to_string())]);
    assert_eq!(spec_model_kinds(spec), ["alpha_1", "beta", "gamma"]);
    let block = "paths: {}\ncomponents:\n  schemas:\n    Body:\n      properties:\n        model:\n          type: string\n          enum:\n            - one\n            - two\n";
    assert_eq!(spec_model_kinds(block), ["one", "two"]);
}
