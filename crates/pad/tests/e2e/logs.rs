//! Tokens are never logged (docs/reliability.md): `pad serve` at `RUST_LOG=trace`
//! is sent good, bad, revoked and new tokens, in `Authorization`, in a
//! sign-in body and as a session cookie; afterwards its whole stderr holds
//! neither any of those secrets nor their SHA-256 hashes. The one exception is
//! documented: the first start prints the owner's token once, on one line.

use crate::common;

use std::time::Duration;

use common::server::TestServer;
use pad_client::Client;
use pad_core::NewItem;
use pad_core::api::{ClaimBody, CreateToken};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WS: &str = "default";

/// Sends one raw HTTP/1.1 request and answers with the response's head and
/// body as text (so the test controls every byte, including bad ones).
async fn raw(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let addr = url.strip_prefix("http://").unwrap();
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> &str {
    answer.split(' ').nth(1).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_reach_the_log() {
    let server = TestServer::start_with_log_level("trace");
    let owner = Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let url = server.url.as_str();

    // A second token, used, then revoked and used again.
    let created =
        owner.create_token(WS, &CreateToken { name: "ci".into(), email: None, scope: None, role: None }).await.unwrap();
    let second = Client::new(server.url.parse().unwrap(), &created.token).unwrap();
    let item = second.create_item(WS, &NewItem { title: "logged?".into(), ..Default::default() }).await.unwrap();
    let r = item.item_ref.to_string();
    second.claim(WS, &r, &ClaimBody { holder: Some("w".into()), ..Default::default() }).await.unwrap();
    second.item(WS, &r).await.unwrap();
    owner.revoke_token(WS, created.info.id).await.unwrap();
    assert!(second.me().await.is_err(), "a revoked token still works");

    // Well-formed but unknown, and malformed.
    let unknown = pad_server::auth::new_token();
    let malformed = format!("not-a-pad-token-{:016x}", rand::random::<u64>());
    for bad in [&unknown, &malformed] {
        assert!(Client::new(server.url.parse().unwrap(), bad).unwrap().me().await.is_err());
        let auth = format!("Bearer {bad}");
        let answer = raw(url, "GET", "/api/v1/me", &[("Authorization", &auth)], "").await;
        assert_eq!(status(&answer), "401", "{answer}");
    }

    // Sign-in bodies: a good token, a bad one, and broken JSON around one.
    let json = [("Content-Type", "application/json")];
    let answer = raw(url, "POST", "/api/v1/session", &json, &format!(r#"{{"token":"{}"}}"#, server.token)).await;
    assert_eq!(status(&answer), "204", "{answer}");
    let session = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: pad_session=").or_else(|| l.strip_prefix("Set-Cookie: pad_session=")))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let answer = raw(url, "POST", "/api/v1/session", &json, &format!(r#"{{"token":"{unknown}"}}"#)).await;
    assert_eq!(status(&answer), "401", "{answer}");
    let answer = raw(url, "POST", "/api/v1/session", &json, &format!(r#"{{"token":"{malformed}", oops"#)).await;
    assert_eq!(status(&answer), "400", "{answer}");

    // The session cookie: a read, and a write without the CSRF header.
    let cookie = format!("pad_session={session}");
    let answer = raw(url, "GET", "/api/v1/me", &[("Cookie", &cookie)], "").await;
    assert_eq!(status(&answer), "200", "{answer}");
    let body = r#"{"title":"x"}"#;
    let answer = raw(url, "POST", "/api/v1/workspaces/default/items", &[("Cookie", &cookie), json[0]], body).await;
    assert_eq!(status(&answer), "403", "{answer}");

    // A restart at trace level logs startup too.
    let mut server = server;
    tokio::task::block_in_place(|| server.restart());
    owner.me().await.unwrap();

    let log = server.log();
    assert!(log.lines().count() > 50, "a trace-level log was expected:\n{log}");
    let mut secrets = vec![("the owner's token", server.token.clone()), ("the second token", created.token.clone())];
    secrets.extend([("an unknown token", unknown.clone()), ("a malformed token", malformed.clone())]);
    secrets.push(("the web session id", session.clone()));
    let mut checked = 0;
    for (what, secret) in &secrets {
        for (form, needle) in [("", secret.clone()), (" (its SHA-256)", pad_server::auth::hash_token(secret))] {
            checked += 1;
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(needle.as_str())).collect();
            let announced = |l: &&str| l.starts_with("pad: the owner's token, shown only this once: ");
            let allowed = usize::from(*what == "the owner's token" && form.is_empty());
            assert!(
                lines.len() == allowed && lines.iter().all(announced),
                "{what}{form} is in the log:\n{}",
                lines.join("\n")
            );
        }
    }
    println!(
        "tokens never logged: {checked} secrets and hashes absent from {} lines of trace log",
        log.lines().count()
    );
}
