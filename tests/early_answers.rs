//! Every request ends in an answer the client can read, also when the answer is decided
//! before the body has been read: the client here behaves as Python's http.client and
//! most others do, sending the whole body before reading anything. Without the drain the
//! server's close resets the connection and the answer is lost (a broken pipe).

mod common;

use common::TestServer;
use mercer::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends the request head and the whole body, then reads the answer to its end: its
/// status line and body, or the I/O error that cut it.
async fn send_all(url: &str, head: &str, body: &[u8]) -> Result<(u16, String), String> {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    // The client asks to close after the answer, so that reading to the end ends.
    let head = format!("{head}Host: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).await.map_err(|e| format!("writing the head: {e}"))?;
    s.write_all(body).await.map_err(|e| format!("writing the body: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.map_err(|e| format!("reading the answer: {e}"))?;
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).ok_or_else(|| format!("no answer: {text:?}"))?;
    Ok((status, text))
}

fn big_csv(bad_line_3: bool, rows: usize) -> Vec<u8> {
    let mut b = String::from("a,b,y\n1,2,3\n");
    b.push_str(if bad_line_3 { "1,x,3\n" } else { "1,2,3\n" });
    b.push_str(&"1.0,2.0,3.0\n".repeat(rows));
    b.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_decided_before_the_body_ends_still_arrive() {
    let config = Config {
        max_body_bytes: 1 << 20,
        max_dataset_bytes: 8 << 20,
        api_keys: "right-token".into(),
        ..Config::for_tests()
    };
    let s = TestServer::start(config).await;
    let auth = "Authorization: Bearer right-token\r\n";
    // A bad row on line 3 of a 6 MB upload: the parser stops there, the 422 names it.
    let (status, text) = send_all(
        &s.url,
        &format!("POST /datasets HTTP/1.1\r\nContent-Type: text/csv\r\n{auth}"),
        &big_csv(true, 500_000),
    )
    .await
    .expect("an answer");
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("/line/3"), "{text}");

    // No token: 401 before anything is read.
    let (status, _) =
        send_all(&s.url, "POST /datasets HTTP/1.1\r\nContent-Type: text/csv\r\n", &big_csv(false, 500_000))
            .await
            .expect("an answer");
    assert_eq!(status, 401);
    // A training body over MERCER_MAX_BODY_BYTES (declared): 413.
    let body = vec![b' '; 3 << 20];
    let (status, text) = send_all(&s.url, &format!("POST /models HTTP/1.1\r\n{auth}"), &body).await.expect("an answer");
    assert_eq!(status, 413, "{text}");
    // A dataset over MERCER_MAX_DATASET_BYTES: 413 too.
    let (status, text) = send_all(
        &s.url,
        &format!("POST /datasets HTTP/1.1\r\nContent-Type: text/csv\r\n{auth}"),
        &big_csv(false, 1_000_000),
    )
    .await
    .expect("an answer");
    assert_eq!(status, 413, "{text}");
    // A model that does not exist, asked with a large CSV body.
    let (status, _) = send_all(
        &s.url,
        &format!(
            "POST /models/00000000-0000-0000-0000-000000000000/predict HTTP/1.1\r\nContent-Type: text/csv\r\n{auth}"
        ),
        &big_csv(false, 80_000),
    )
    .await
    .expect("an answer");
    assert_eq!(status, 404);
    // And a body read to its end keeps the connection open for the next request.
    let ok = s.http.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().get("connection").is_none_or(|v| v != "close"));
}

/// The one `mercer_http_unanswered_total` sample with this `why`, or 0 when absent.
async fn unanswered(s: &TestServer, why: &str) -> u64 {
    let text = s.get("/metrics").await.text().await.unwrap();
    let want = format!("mercer_http_unanswered_total{{why=\"{why}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(want.as_str())).map_or(0, |v| v.trim().parse().unwrap())
}

/// A connection that ends with a request on it unanswered is counted, by why; a request
/// answered to its end, on a connection then closed, is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_without_an_answer_are_counted_by_why() {
    let s = TestServer::start(Config { fit_workers: 1, ..Config::for_tests() }).await;
    let (status, _) = send_all(&s.url, "GET /healthz HTTP/1.1\r\n", b"").await.expect("an answer");
    assert_eq!(status, 200);
    // A HEAD's answer has no body to write (hyper drops it unread): answered all the same.
    let (status, _) = send_all(&s.url, "HEAD /healthz HTTP/1.1\r\n", b"").await.expect("an answer");
    assert_eq!(status, 200);
    let metrics = s.get("/metrics").await.text().await.unwrap();
    let counted = metrics.lines().filter(|l| l.starts_with("mercer_http_unanswered_total{") && !l.ends_with(" 0"));
    assert_eq!(counted.count(), 0, "answered requests are not counted:\n{metrics}");
    // A fit that waits for its model while every worker is busy; the client goes away
    // before the answer: the server can no longer answer it.
    let block = s.block_worker();
    let addr = s.url.trim_start_matches("http://");
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = br#"{"model":"kernel_ridge","x":[[0],[1],[2]],"y":[0,1,0]}"#;
    let head = format!(
        "POST /models HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(body).await.unwrap();
    let queued = common::eventually(std::time::Duration::from_secs(5), async || s.service().pool.queued() == 1).await;
    assert!(queued, "the fit waits in the queue");
    drop(c);
    let counted =
        common::eventually(std::time::Duration::from_secs(5), async || unanswered(&s, "client_closed").await == 1)
            .await;
    drop(block);
    assert!(counted, "the cut request is counted once as client_closed");
    assert_eq!(unanswered(&s, "drain_bound").await, 0);
}

/// A connection that received bytes, wrote none and had no request reach the router (a
/// request head cut short) is counted once as `before_request`; one that sent nothing, and
/// one whose request was answered, are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_before_a_request_formed_are_counted() {
    let s = TestServer::start(Config::for_tests()).await;
    let addr = s.url.trim_start_matches("http://").to_string();
    // Nothing sent: a port check, not a lost request.
    drop(tokio::net::TcpStream::connect(&addr).await.unwrap());
    let (status, _) = send_all(&s.url, "GET /healthz HTTP/1.1\r\n", b"").await.expect("an answer");
    assert_eq!(status, 200);
    // A CSV upload whose head ends mid-header: no request ever reaches the router.
    let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
    c.write_all(format!("POST /datasets HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/").as_bytes()).await.unwrap();
    c.flush().await.unwrap();
    drop(c);
    let counted =
        common::eventually(std::time::Duration::from_secs(5), async || unanswered(&s, "before_request").await == 1)
            .await;
    assert!(counted, "the cut connection is counted once as before_request");
    assert_eq!(unanswered(&s, "client_closed").await, 0, "and not as a request");
}
