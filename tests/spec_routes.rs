//! openapi.yaml and the router agree: every route the router serves is in the spec with
//! its method, and every path and method of the spec is served; other methods on a
//! spec'd path answer 405, and no route answers 404-no-route.

mod common;

use common::{problem, TestServer};
use mercer::api::ROUTES;
use std::collections::BTreeSet;

/// The spec's (METHOD, path) pairs.
fn spec_operations() -> BTreeSet<(String, String)> {
    common::spec_operations(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap())
}

#[test]
fn the_spec_lists_exactly_the_routes_the_router_serves() {
    let served: BTreeSet<(String, String)> = ROUTES.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
    let spec = spec_operations();
    assert!(spec.len() >= 9, "the spec parsed: {spec:?}");
    assert_eq!(served, spec, "router (left) and openapi.yaml (right) differ");
}

#[tokio::test]
async fn every_route_is_served_and_other_methods_are_405() {
    let s = TestServer::default().await;
    let id = uuid::Uuid::new_v4();
    for (method, path) in spec_operations() {
        let url = s.url(&path.replace("{id}", &id.to_string()).replace("{file}", "app.js").replace("{trial_id}", "0"));
        for m in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            let r = s.http.request(m.parse().unwrap(), &url).body("{}").send().await.unwrap();
            let status = r.status().as_u16();
            if m == method {
                assert_ne!(status, 405, "{m} {path} is served");
                if status == 404 && path.starts_with("/v2") {
                    // The Open Inference Protocol's own error form.
                    let body: serde_json::Value = r.json().await.unwrap();
                    assert!(body["error"].as_str().unwrap().starts_with("no model"), "{m} {path}: {body}");
                } else if status == 404 {
                    let (_, p) = problem(r).await;
                    let want = match path.split('/').nth(1) {
                        Some("datasets") => "no dataset",
                        Some("studies") => "no study",
                        _ => "no model",
                    };
                    assert!(p["detail"].as_str().unwrap().starts_with(want), "{m} {path}: {p}");
                }
            } else if !spec_operations().contains(&(m.to_string(), path.clone())) {
                assert_eq!(status, 405, "{m} {path} is not in the spec");
            }
        }
    }
    let (status, p) = problem(s.get("/nowhere").await).await;
    assert_eq!((status, p["type"].as_str()), (404, Some("/problems/not-found")));
}

/// Each operation's `x-mercer-scope` in openapi.yaml is the scope the router asks of it
/// (none on the open routes).
#[test]
fn the_spec_marks_each_operations_scope() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap();
    let marked: std::collections::BTreeMap<(String, String), String> = common::spec_operation_lines(&spec)
        .into_iter()
        .filter_map(|(operation, line)| {
            Some((operation, line.strip_prefix("      x-mercer-scope: ")?.trim().to_string()))
        })
        .collect();
    let want: std::collections::BTreeMap<(String, String), String> = ROUTES
        .iter()
        .filter_map(|(m, p, scope)| scope.map(|s| ((m.to_string(), p.to_string()), s.name().to_string())))
        .collect();
    assert_eq!(marked, want, "openapi.yaml (left) and the router (right) differ");
}
