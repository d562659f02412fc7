//! A real `pad serve` process for end-to-end tests.
//!
//! `TestServer::start()` spawns the binary under test on `127.0.0.1:0` with a
//! fresh `PAD_HOME` and SQLite database, waits for the `pad: listening on`
//! line, and reads the owner's token from the `default` profile the server
//! saved. `pad()` builds CLI commands that use that profile; the server is
//! killed when the `TestServer` is dropped. Everything the server writes to
//! stderr, across restarts, is kept in a file: `log()`.
//!
//! Keep this API small: other test files depend on it.

use std::io::Write;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long `pad serve` may take to start listening (a cold SQLite migration
/// on a busy CI machine is the slow part).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `PAD_METRICS_TOKEN` of every server started here: `/metrics` answers only
/// requests bearing it (docs/operations.md, "Metrics"). [`TestServer::scrape`]
/// sends it.
pub const METRICS_TOKEN: &str = "e2e-metrics-token";

pub struct TestServer {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// `PAD_HOME` for the server and every `pad()` command.
    pub home: PathBuf,
    /// The owner's token of workspace `default`.
    pub token: String,
    database_url: String,
    /// `RUST_LOG` of the server process.
    rust_log: String,
    /// The server's stderr, appended to by every start.
    log_path: PathBuf,
    child: Child,
    /// Removed on drop, after the server is killed.
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// A server on a fresh SQLite database in a temporary `PAD_HOME`.
    pub fn start() -> TestServer {
        Self::start_inner(None, "warn", None)
    }

    /// A server on the given (empty) database, e.g. `postgres://…/pad_x`.
    pub fn start_with_db(database_url: &str) -> TestServer {
        Self::start_inner(Some(database_url), "warn", None)
    }

    /// A server on a database that already holds pad data (migrated, or a
    /// backup), used with `token`.
    pub fn start_on(database_url: &str, token: &str) -> TestServer {
        Self::start_inner(Some(database_url), "warn", Some(token))
    }

    /// Like `start()`, with `RUST_LOG=rust_log` (e.g. `trace`) for the server.
    pub fn start_with_log_level(rust_log: &str) -> TestServer {
        Self::start_inner(None, rust_log, None)
    }

    /// Another instance on this server's database (which must be one that
    /// many instances can share: PostgreSQL), with its own `PAD_HOME` and the
    /// same token.
    pub fn start_sibling(&self) -> TestServer {
        Self::start_inner(Some(&self.database_url), &self.rust_log, Some(&self.token))
    }

    fn start_inner(database_url: Option<&str>, rust_log: &str, token: Option<&str>) -> TestServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let home = dir.path().join("home");
        std::fs::create_dir(&home).expect("PAD_HOME");
        let database_url = match database_url {
            Some(url) => url.to_string(),
            None => format!("sqlite://{}", home.join("pad.db").display()),
        };
        let log_path = dir.path().join("serve.log");
        let (child, url) = spawn(&home, &database_url, "127.0.0.1:0", rust_log, &log_path);
        let token = token.map_or_else(|| read_token(&home), str::to_string);
        TestServer { url, home, token, database_url, rust_log: rust_log.to_string(), log_path, child, _dir: dir }
    }

    /// Everything the server wrote to stderr so far, over all its starts.
    /// The `pad serve` process, for signals (SIGSTOP as a partition).
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("a pid")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Kills the server and starts it again on the same address and
    /// database, as a crash and restart would. Blocks until it listens.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let addr = self.url.strip_prefix("http://").expect("an http URL").to_string();
        let (child, url) = spawn(&self.home, &self.database_url, &addr, &self.rust_log, &self.log_path);
        assert_eq!(url, self.url, "restarted on another address");
        self.child = child;
    }

    /// Kills the server (its files stay until the `TestServer` is dropped).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `pad` with `PAD_HOME` set (so the `default` profile is used) and every
    /// other pad variable unset; run in the temporary directory so no stray
    /// `.pad.toml` is picked up.
    pub fn pad(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pad"));
        cmd.env("PAD_HOME", &self.home)
            .env_remove("PAD_URL")
            .env_remove("PAD_TOKEN")
            .env_remove("PAD_PROFILE")
            .env_remove("PAD_WORKSPACE")
            .env("NO_COLOR", "1")
            .current_dir(self.home.parent().expect("PAD_HOME has a parent"))
            .stdin(Stdio::null());
        cmd
    }

    /// `GET /metrics` over a plain socket with [`METRICS_TOKEN`], the scrape
    /// a Prometheus server makes: the exposition text.
    pub fn scrape(&self) -> String {
        use std::io::Read;
        let addr = self.url.strip_prefix("http://").expect("an http URL");
        let mut conn = std::net::TcpStream::connect(addr).expect("connect to the server");
        write!(conn, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {METRICS_TOKEN}\r\n\r\n")
            .expect("send the scrape");
        let mut text = String::new();
        conn.read_to_string(&mut text).expect("read the scrape");
        assert!(text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"), "{text}");
        text.split_once("\r\n\r\n").expect("headers end").1.to_string()
    }

    /// Runs `pad ARGS…` to completion and returns its output.
    pub fn pad_output<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.pad().args(args).output().expect("run pad")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `pad serve` on `listen`, and the URL it reports once it listens. Its
/// stderr is appended to `log_path`.
fn spawn(
    home: &std::path::Path, database_url: &str, listen: &str, rust_log: &str, log_path: &std::path::Path,
) -> (Child, String) {
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open(log_path).expect("server log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pad"))
        .args(["serve", "--listen", listen, "--database-url", database_url])
        .env("PAD_HOME", home)
        .env("RUST_LOG", rust_log)
        // Several instances and test binaries share one PostgreSQL server
        // (100 connections by default): keep each instance's pool small.
        .env("PAD_PG_MAX_CONNECTIONS", "8")
        // The webhook tests' receivers listen on 127.0.0.1 (docs/webhooks.md).
        .env("PAD_WEBHOOK_ALLOW_PRIVATE", "1")
        .env("PAD_METRICS_TOKEN", METRICS_TOKEN)
        .env_remove("PAD_URL")
        .env_remove("PAD_TOKEN")
        .env_remove("PAD_PROFILE")
        .env_remove("PAD_WORKSPACE")
        .current_dir(home.parent().expect("PAD_HOME has a parent"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn `pad serve`");

    // Read stderr on a thread: it must be drained for the server's whole
    // life (a full pipe would block its logging), and the wait for the
    // listening line needs a timeout.
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
            if let Some(url) = line.strip_prefix("pad: listening on ") {
                let _ = tx.send(url.trim().to_string());
            } else if std::env::var_os("PAD_TEST_SERVER_LOG").is_some() {
                eprintln!("[pad serve] {line}");
            }
        }
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(url) => (child, url),
        Err(_) => {
            let _ = child.kill();
            let status = child.wait();
            panic!(
                "`pad serve` did not start listening within {START_TIMEOUT:?} ({status:?}); set PAD_TEST_SERVER_LOG=1 to see its log"
            );
        }
    }
}

/// The `default` profile's token in `$PAD_HOME/credentials.toml`.
fn read_token(home: &std::path::Path) -> String {
    let path = home.join("credentials.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let creds: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    creds["profiles"]["default"]["token"].as_str().expect("profile `default` has a token").to_string()
}
