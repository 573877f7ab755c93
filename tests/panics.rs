//! Every request ends in an HTTP answer: a handler that panics, under the service's
//! middleware stack, answers a 500 problem, is counted in /metrics, and leaves the server
//! (and the connection's peers) serving.

use axum::routing::get;
use axum::Router;
use mercer::config::Config;
use mercer::service::Service;
use std::sync::Arc;

async fn boom() -> &'static str {
    panic!("boom: a bug in a handler")
}

async fn boom_string() -> &'static str {
    std::panic::panic_any(String::from("an owned message"))
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_is_counted() {
    let service = Arc::new(Service::try_new(Config::for_tests()).unwrap());
    let routes = Router::new()
        .route("/boom", get(boom))
        .route("/boom-string", get(boom_string))
        .route("/fine", get(|| async { "fine" }))
        .route("/metrics", get(mercer::api::ops::metrics));
    let app = mercer::api::layered(service, routes);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    // One client, so that the later requests reuse the connection the panics were on.
    let http = reqwest::Client::new();
    for path in ["/boom", "/boom-string", "/boom"] {
        let r = http.get(format!("{url}{path}")).send().await.expect("an answer, not a closed connection");
        assert_eq!(r.status(), 500, "{path}");
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        assert!(r.headers().contains_key("x-request-id"), "{path}: the request id is kept");
        let p: serde_json::Value = r.json().await.unwrap();
        assert_eq!((p["status"].as_u64(), p["type"].as_str()), (Some(500), Some("/problems/internal")), "{p}");
        assert!(!p["detail"].as_str().unwrap().contains("boom"), "the panic message is logged, not sent: {p}");
    }
    let r = http.get(format!("{url}/fine")).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.text().await.unwrap().as_str()), (200, "fine"));
    let metrics = http.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("mercer_handler_panics_total 3"), "{metrics}");
    let boom = metrics
        .lines()
        .find(|l| {
            l.starts_with("mercer_http_requests_total{")
                && l.contains("route=\"/boom\"")
                && l.contains("status=\"500\"")
        })
        .unwrap_or_else(|| panic!("no 500 counted for /boom: {metrics}"));
    assert!(boom.ends_with(" 2"), "{boom}");
}
