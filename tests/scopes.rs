//! API keys with scopes: every route with every scope (and with no key, a wrong one, a
//! bare one and a digest), the 403 that names the scope needed, and the audit line that
//! names the key and never its token.

mod common;

use common::TestServer;
use mercer::api::keys::Scope;
use mercer::api::ROUTES;
use mercer::config::Config;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

const PREDICTOR: &str = "tok-predictor-6b1e";
const TRAINER: &str = "tok-trainer-93d0";
const ADMIN: &str = "tok-admin-2a77";
const BARE: &str = "tok-bare-c4f8";
const HASHED: &str = "tok-hashed-0e19";

/// Every log line the process writes, as JSON (one subscriber for the test binary).
fn log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        buf
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn digest(token: &str) -> String {
    Sha256::digest(token).iter().map(|b| format!("{b:02x}")).collect()
}

async fn server() -> TestServer {
    let keys = format!(
        "predictor={PREDICTOR}:predict,trainer={TRAINER}:train,root={ADMIN}:admin,{BARE},auditor=sha256:{}:predict",
        digest(HASHED)
    );
    TestServer::start(Config { api_keys: keys, ..Config::for_tests() }).await
}

#[tokio::test]
async fn every_route_answers_every_scope_as_its_own_requires() {
    let s = server().await;
    let id = uuid::Uuid::new_v4().to_string();
    let tokens: [(Option<&str>, Option<Scope>); 7] = [
        (None, None),
        (Some("wrong"), None),
        (Some(PREDICTOR), Some(Scope::Predict)),
        (Some(HASHED), Some(Scope::Predict)),
        (Some(TRAINER), Some(Scope::Train)),
        (Some(ADMIN), Some(Scope::Admin)),
        (Some(BARE), Some(Scope::Admin)),
    ];
    let mut forbidden = 0;
    for (method, path, needs) in ROUTES {
        let url = s.url(&path.replace("{id}", &id).replace("{file}", "app.js").replace("{trial_id}", "0"));
        for (token, has) in tokens {
            let mut req =
                s.http.request(method.parse().unwrap(), &url).header("content-type", "application/json").body("{}");
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            let at = format!("{method} {path} with {has:?} (needs {needs:?})");
            match (needs, has) {
                (None, _) => assert!(!matches!(status, 401 | 403), "{at}: {status}"),
                (Some(_), None) => assert_eq!(status, 401, "{at}"),
                (Some(needs), Some(has)) if has < needs => {
                    assert_eq!(status, 403, "{at}");
                    forbidden += 1;
                    let body: Value = r.json().await.unwrap();
                    let message = if path.starts_with("/v2") {
                        body["error"].as_str().unwrap().to_string()
                    } else {
                        assert_eq!(body["type"], "/problems/forbidden", "{at}: {body}");
                        body["detail"].as_str().unwrap().to_string()
                    };
                    assert!(message.contains(&format!("`{needs}`")), "{at}: names the scope needed: {message}");
                    assert!(message.contains(&format!("`{has}`")), "{at}: and the key's: {message}");
                }
                (Some(_), Some(_)) => assert!(!matches!(status, 401 | 403), "{at}: {status}"),
            }
        }
    }
    // predict keys (2) on each train and admin route, train keys on each admin route.
    let count = |s: Scope| ROUTES.iter().filter(|r| r.2 == Some(s)).count();
    assert_eq!(forbidden, 2 * (count(Scope::Train) + count(Scope::Admin)) + count(Scope::Admin));
    assert!(count(Scope::Admin) >= 3 && count(Scope::Train) >= 5 && count(Scope::Predict) >= 10);
}

#[tokio::test]
async fn mutations_are_logged_with_the_keys_name_and_never_its_token() {
    let log = log();
    let s = server().await;
    let body = json!({"model": "kernel_ridge", "x": [[0.0], [1.0], [2.0]], "y": [0.0, 1.0, 2.0]});
    let r = s.http.post(s.url("/models")).bearer_auth(TRAINER).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let r = s.http.delete(s.url(&format!("/models/{id}"))).bearer_auth(TRAINER).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let r = s.http.delete(s.url(&format!("/models/{id}"))).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), 204);
    drop(s);
    let text = String::from_utf8(log.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let requests: Vec<&Value> = lines.iter().filter(|l| l["fields"]["message"] == "request").collect();
    let find = |method: &str, status: u64| -> Vec<&Value> {
        requests
            .iter()
            .copied()
            .filter(|l| l["fields"]["method"] == method && l["fields"]["status"] == status)
            .collect()
    };
    let fit = find("POST", 201);
    assert_eq!(fit.len(), 1, "one line for the fit: {fit:?}");
    assert_eq!(fit[0]["fields"]["key"], "trainer");
    let deleted = find("DELETE", 204);
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(deleted[0]["fields"]["key"], "root");
    for token in [PREDICTOR, TRAINER, ADMIN, BARE, HASHED] {
        assert!(!text.contains(token), "a token in the log");
    }
}

#[test]
fn a_bad_entry_stops_the_server_before_it_listens() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mercer"))
        .arg("serve")
        .env("MERCER_API_KEYS", "ok-token,reader=sha256:not-hex:predict")
        .env("MERCER_BIND", "127.0.0.1:0")
        .env("MERCER_DATA_DIR", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MERCER_API_KEYS entry 2"), "{err}");
    assert!(!err.contains("ok-token"), "{err}");
}
