//! A real S3 server (s3s-fs over a temp directory) in the test's process, on its own
//! runtime: replicas reach it over TCP as they would a remote store. `kill` drops the
//! runtime, which closes the listener and every connection at once, as `kill -9` of the
//! server's process would; `start` brings it back on the same port.

use std::net::SocketAddr;
use std::path::PathBuf;

pub const ACCESS_KEY: &str = "mercer-test";
pub const SECRET_KEY: &str = "mercer-test-secret";
pub const BUCKET: &str = "mercer";

pub struct S3Server {
    pub addr: SocketAddr,
    root: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
}

impl S3Server {
    /// A server on a free loopback port with an empty bucket.
    pub fn start() -> S3Server {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("mercer-s3-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket directory");
        let mut s = S3Server { addr: "127.0.0.1:0".parse().unwrap(), root, runtime: None };
        s.restart();
        s
    }

    /// Every connection closed and the port released, at once.
    pub fn kill(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    /// Serves again (on the same port after the first start).
    pub fn restart(&mut self) {
        self.kill();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-s3")
            .enable_all()
            .build()
            .expect("a runtime for the S3 server");
        let (fs_root, want) = (self.root.clone(), self.addr);
        // Bound here, not in `block_on`: a test calls this from its own runtime. The port
        // is reused at once (its closed connections linger in TIME_WAIT), as a restarted
        // server's would be.
        let listener = {
            let _entered = rt.enter();
            let bind = || -> std::io::Result<tokio::net::TcpListener> {
                let socket = tokio::net::TcpSocket::new_v4()?;
                socket.set_reuseaddr(true)?;
                socket.bind(want)?;
                socket.listen(1024)
            };
            bind().unwrap_or_else(|e| panic!("cannot bind the S3 server to {want}: {e}"))
        };
        self.addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            let fs = s3s_fs::FileSystem::new(fs_root).expect("s3s-fs over the temp dir");
            let service = {
                let mut b = s3s::service::S3ServiceBuilder::new(fs);
                b.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
                b.build()
            };
            let http = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                let conn = http.serve_connection(hyper_util::rt::TokioIo::new(socket), service.clone()).into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        self.runtime = Some(rt);
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The settings a replica's S3 client needs for this server.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("aws_endpoint", self.endpoint()),
            ("aws_access_key_id", ACCESS_KEY.into()),
            ("aws_secret_access_key", SECRET_KEY.into()),
            ("aws_region", "us-east-1".into()),
            ("aws_allow_http", "true".into()),
            ("aws_skip_signature", "false".into()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
