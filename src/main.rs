//! The mercer binary: `mercer` serves; `mercer healthcheck` probes a running server (the
//! container's HEALTHCHECK, as the slim image has no curl); `mercer config` prints the
//! effective settings.

use clap::{Parser, Subcommand};
use mercer::config::Config;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "mercer", version, about = "Kernel machines served over HTTP")]
struct Cli {
    /// A TOML file overriding config/default.toml (MERCER_* variables override both).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP (the default).
    Serve,
    /// Exit 0 if the server at the configured address answers /healthz with 200.
    Healthcheck,
    /// Print the effective settings as TOML.
    Config,
}

fn main() -> ExitCode {
    mercer::tune_allocator();
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mercer: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config),
        Command::Healthcheck => healthcheck(&config.bind),
        Command::Config => {
            print!("{}", toml::to_string(&config).expect("settings serialise"));
            ExitCode::SUCCESS
        }
    }
}

fn serve(config: Config) -> ExitCode {
    mercer::telemetry::init(&config.log);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("mercer-http").build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mercer: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(mercer::server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "mercer failed");
            eprintln!("mercer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// GET /healthz over a plain TCP connection to the bind address (a wildcard address is
/// probed on loopback).
fn healthcheck(bind: &str) -> ExitCode {
    let addr: Option<SocketAddr> = bind.to_socket_addrs().ok().and_then(|mut a| a.next()).map(|mut a| {
        if a.ip().is_unspecified() {
            a.set_ip(if a.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
        }
        a
    });
    let Some(addr) = addr else {
        eprintln!("healthcheck: cannot resolve {bind}");
        return ExitCode::FAILURE;
    };
    let probe = || -> std::io::Result<bool> {
        let timeout = Duration::from_secs(3);
        let mut s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        Ok(&head[..] == b"HTTP/1.1 200")
    };
    match probe() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("healthcheck: {addr} answered /healthz with an error");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("healthcheck: {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
