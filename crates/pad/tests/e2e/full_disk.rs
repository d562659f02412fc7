//! A log that cannot be written never takes down a request or the server
//! (docs/operations.md, "When the log cannot be written"). `pad serve` runs
//! with stdout and stderr on `/dev/full`, where every write fails with
//! ENOSPC, as a log file on a full disk would: the first start still
//! bootstraps and saves its profile, every write and read over HTTP is
//! answered, and a start that cannot proceed exits with its own code, never
//! 101 (a panic).

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pad_client::Client;
use pad_core::NewItem;
use pad_core::api::{ClaimBody, CompleteBody, NewComment};

const WS: &str = "default";

fn dev_full() -> Stdio {
    Stdio::from(File::options().write(true).open("/dev/full").expect("/dev/full"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `pad serve` with stdout and stderr on `/dev/full`.
fn serve_on_dev_full(home: &Path, database_url: &str, listen: &str, rust_log: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pad"))
        .args(["serve", "--listen", listen, "--database-url", database_url])
        .env("PAD_HOME", home)
        .env("RUST_LOG", rust_log)
        .env_remove("PAD_URL")
        .env_remove("PAD_TOKEN")
        .env_remove("PAD_PROFILE")
        .env_remove("PAD_WORKSPACE")
        .current_dir(home.parent().unwrap())
        .stdin(Stdio::null())
        .stdout(dev_full())
        .stderr(dev_full())
        .spawn()
        .expect("spawn `pad serve`")
}

/// Waits until the server saved its profile and accepts connections; its
/// listening line went nowhere.
fn wait_until_serving(child: &mut Child, home: &Path, addr: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let path = home.join("credentials.toml");
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("`pad serve` with its output on /dev/full exited: {status}");
        }
        let token = std::fs::read_to_string(&path).ok().and_then(|text| {
            let creds: toml::Table = text.parse().ok()?;
            creds["profiles"]["default"]["token"].as_str().map(str::to_string)
        });
        if let Some(token) = token
            && std::net::TcpStream::connect(addr).is_ok()
        {
            return token;
        }
        assert!(Instant::now() < deadline, "`pad serve` on /dev/full did not start serving");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_log_takes_down_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let database_url = format!("sqlite://{}", home.join("pad.db").display());
    let addr = format!("127.0.0.1:{}", free_port());
    // `debug` logs every request, so each one meets the failing writer.
    let mut child = serve_on_dev_full(&home, &database_url, &addr, "debug");
    let token = tokio::task::block_in_place(|| wait_until_serving(&mut child, &home, &addr));

    let client = Client::new(format!("http://{addr}").parse().unwrap(), &token).unwrap();
    let mut answered = 0;
    for i in 0..20 {
        let item = client
            .create_item(WS, &NewItem { title: format!("written with a full log {i}"), ..Default::default() })
            .await
            .unwrap_or_else(|e| panic!("create {i} with the log on a full disk: {e}"));
        let r = item.item_ref.to_string();
        let claim = client
            .claim(WS, &r, &ClaimBody { holder: Some("w".into()), ..Default::default() })
            .await
            .unwrap_or_else(|e| panic!("claim {r}: {e}"));
        client
            .add_comment(WS, &r, &NewComment { body: "still logging nowhere".into() })
            .await
            .unwrap_or_else(|e| panic!("comment {r}: {e}"));
        let body =
            CompleteBody { holder: Some("w".into()), lease_id: Some(claim.lease.lease_id), ..Default::default() };
        client.complete(WS, &r, &body).await.unwrap_or_else(|e| panic!("complete {r}: {e}"));
        assert_eq!(client.item(WS, &r).await.unwrap().item_ref, item.item_ref);
        answered += 5;
    }
    // A request that fails is answered too (and logged nowhere).
    assert!(client.item(WS, "TASK-999").await.is_err());
    assert!(child.try_wait().unwrap().is_none(), "the server died with its log on a full disk");

    // A restart (not a first start) on the same database, log still full.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut child = serve_on_dev_full(&home, &database_url, &addr, "info");
    tokio::task::block_in_place(|| wait_until_serving(&mut child, &home, &addr));
    client.create_item(WS, &NewItem { title: "after a restart".into(), ..Default::default() }).await.unwrap();
    answered += 1;

    // A start that cannot proceed (the address is taken) says so with its
    // own exit code, not a panic's 101.
    let mut second = serve_on_dev_full(&home, &database_url, &addr, "info");
    let status = tokio::task::block_in_place(|| second.wait()).unwrap();
    assert_eq!(status.code(), Some(3), "a refused start with its output on /dev/full: {status}");
    child.kill().unwrap();
    child.wait().unwrap();
    println!("log on /dev/full: {answered} requests answered, no panic; a refused start exits {status}");
}
