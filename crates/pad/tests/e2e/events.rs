//! "Live events" (docs/api.md, Events): the event log over SSE — what is written, how a
//! stream resumes, `pad watch` across a server restart, and the stream limit.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::server::TestServer;
use pad_client::{Client, ClientError, EventStream};
use pad_core::api::{ClaimBody, ErrorCode, NewComment, ReleaseBody};
use pad_core::{Event, ItemPatch, NewItem};

const WS: &str = "default";
/// Longer than any wait the server should make us do (the expiry observer
/// runs every second), short enough to fail fast.
const PATIENCE: Duration = Duration::from_secs(10);

fn client(s: &TestServer) -> Client {
    Client::new(s.url.parse().unwrap(), &s.token).unwrap()
}

/// The next event, or a panic after [`PATIENCE`].
async fn next(stream: &mut EventStream) -> Event {
    match tokio::time::timeout(PATIENCE, stream.next_event()).await {
        Ok(Some(Ok(e))) => e,
        other => panic!("no event within {PATIENCE:?}: {other:?}"),
    }
}

/// Asserts the stream stays quiet for a while: nothing extra, no repeats.
async fn quiet(stream: &mut EventStream) {
    if let Ok(extra) = tokio::time::timeout(Duration::from_millis(1500), stream.next_event()).await {
        panic!("unexpected event: {extra:?}");
    }
}

fn claim(holder: &str, ttl_seconds: Option<u64>) -> ClaimBody {
    ClaimBody { holder: Some(holder.into()), ttl_seconds: ttl_seconds.map(Into::into), ..Default::default() }
}

#[tokio::test]
async fn a_lease_lifecycle_writes_these_events_and_a_refresh_none() {
    let s = TestServer::start();
    let c = client(&s);
    let mut stream = c.event_stream(WS, newest(&c).await).await.unwrap();

    let item = c.create_item(WS, &NewItem { title: "Watched".into(), ..Default::default() }).await.unwrap();
    let r = item.item_ref.to_string();
    c.update_item(WS, &r, &ItemPatch { title: Some("Watched closely".into()), ..Default::default() }).await.unwrap();
    c.claim(WS, &r, &claim("runner-a", None)).await.unwrap();
    assert!(c.claim(WS, &r, &claim("runner-a", None)).await.unwrap().refreshed);
    c.release(WS, &r, &ReleaseBody { holder: Some("runner-a".into()), ..Default::default() }).await.unwrap();
    // Nobody releases this one: the server's observer records its expiry.
    c.claim(WS, &r, &claim("runner-b", Some(1))).await.unwrap();

    let mut events = Vec::new();
    for _ in 0..6 {
        events.push(next(&mut stream).await);
    }
    let types: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        types,
        ["item.created", "item.updated", "lease.claimed", "lease.released", "lease.claimed", "lease.expired"]
    );
    assert!(events.iter().all(|e| e.item_ref.as_deref() == Some(r.as_str())));
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    let expired = &events[5];
    assert_eq!((expired.actor.as_deref(), expired.data["holder"].as_str()), (None, Some("runner-b")));
    quiet(&mut stream).await;
}

#[tokio::test]
async fn a_stream_resumes_after_the_last_id_without_gaps_or_repeats() {
    let s = TestServer::start();
    let c = client(&s);
    let mut stream = c.event_stream(WS, newest(&c).await).await.unwrap();
    let item = c.create_item(WS, &NewItem { title: "Chatty".into(), ..Default::default() }).await.unwrap();
    let r = item.item_ref.to_string();
    let last_seen = next(&mut stream).await.id;
    drop(stream);

    let mut comment_ids = Vec::new();
    for n in 0..100 {
        let body = NewComment { body: format!("comment {n}") };
        comment_ids.push(c.add_comment(WS, &r, &body).await.unwrap().id);
    }

    let mut stream = c.event_stream(WS, last_seen).await.unwrap();
    let mut events = Vec::new();
    for _ in 0..100 {
        events.push(next(&mut stream).await);
    }
    assert!(events.iter().all(|e| e.kind == pad_core::EventKind::CommentCreated), "{events:?}");
    let seen: Vec<i64> = events.iter().map(|e| e.data["comment_id"].as_i64().unwrap()).collect();
    assert_eq!(seen, comment_ids, "the missed comments, in order");
    assert!(events[0].id > last_seen && events.windows(2).all(|w| w[0].id < w[1].id));
    // The stream agrees with the event page.
    let page = c.events(WS, last_seen, 1000).await.unwrap();
    assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), events.iter().map(|e| e.id).collect::<Vec<_>>());
    quiet(&mut stream).await;
}

#[tokio::test]
async fn a_ninth_stream_for_one_token_is_rate_limited() {
    let s = TestServer::start();
    let c = client(&s);
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(c.event_stream(WS, 0).await.unwrap());
    }
    match c.event_stream(WS, 0).await {
        Err(ClientError::Api { status: 429, code: ErrorCode::RateLimited, retry_after, .. }) => {
            assert!(retry_after.is_some(), "429 without Retry-After")
        }
        Err(e) => panic!("expected rate_limited, got {e:?}"),
        Ok(_) => panic!("a ninth stream was opened"),
    }
    // Closing one frees its slot (once the server sees the connection go).
    drop(open.pop());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while let Err(e) = c.event_stream(WS, 0).await {
        assert_eq!(e.code(), Some(ErrorCode::RateLimited), "{e:?}");
        assert!(tokio::time::Instant::now() < deadline, "the closed stream's slot was never freed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The id of the newest event, to start a stream from now.
async fn newest(c: &Client) -> i64 {
    c.events(WS, 0, 1000).await.unwrap().last().map_or(0, |e| e.id)
}

/// `pad watch` as a user runs it: it sees another process's claim, rides
/// out a server restart on the same address and database, and resumes
/// where it stopped.
#[test]
fn pad_watch_prints_events_and_survives_a_server_restart() {
    let mut s = TestServer::start();
    assert_eq!(s.pad_output(["item", "create", "Watched"]).status.code(), Some(0));
    // From the start of the log, so the first line proves it is connected.
    let mut watch = Watch::spawn(&s, &["watch", "--format", "json", "--after", "0"]);
    assert_eq!(watch.next()["type"], "item.created");

    assert!(s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-a"]).status.success());
    let claimed = watch.next();
    assert_eq!(
        (claimed["type"].as_str(), claimed["data"]["holder"].as_str()),
        (Some("lease.claimed"), Some("runner-a"))
    );

    s.restart();
    assert!(s.pad_output(["item", "release", "TASK-1", "--holder", "runner-a"]).status.success());
    assert!(s.pad_output(["item", "comment", "TASK-1", "after the restart"]).status.success());
    let released = watch.next();
    let commented = watch.next();
    assert_eq!(
        (released["type"].as_str(), commented["type"].as_str()),
        (Some("lease.released"), Some("comment.created"))
    );
    let ids: Vec<i64> = watch.lines.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids repeat or go back: {ids:?}");
    watch.assert_quiet();

    // Ctrl-C is how a watch ends: exit 0, with a note about the drop on stderr.
    let (code, stderr) = watch.interrupt();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("reconnected"), "{stderr}");
}

#[test]
fn pad_watch_filters_by_type_and_ref() {
    let s = TestServer::start();
    for title in ["One", "Two"] {
        assert!(s.pad_output(["item", "create", title]).status.success());
    }
    let mut watch =
        Watch::spawn(&s, &["watch", "--format", "json", "--after", "0", "--type", "lease.claimed", "--ref", "task-2"]);
    for r in ["TASK-1", "TASK-2"] {
        assert!(s.pad_output(["item", "claim", r]).status.success());
    }
    let only = watch.next();
    assert_eq!((only["type"].as_str(), only["ref"].as_str()), (Some("lease.claimed"), Some("TASK-2")));
    watch.assert_quiet();
}

#[test]
fn pad_watch_exit_codes_at_start() {
    let s = TestServer::start();
    let refused = s.pad().env("PAD_TOKEN", "pad_not-a-real-token").arg("watch").output().unwrap();
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    // Another server's URL needs its own token (the profile's stays home).
    let down =
        s.pad().env("PAD_TOKEN", "pad_x").args(["watch", "--url", &format!("http://{closed}")]).output().unwrap();
    assert_eq!(down.status.code(), Some(8), "{down:?}");
}

/// A running `pad watch`, its stdout read line by line on a thread.
struct Watch {
    child: Child,
    rx: mpsc::Receiver<serde_json::Value>,
    /// Every line read so far.
    lines: Vec<serde_json::Value>,
}

impl Watch {
    fn spawn(s: &TestServer, args: &[&str]) -> Watch {
        let mut child = s.pad().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Watch { child, rx, lines: Vec::new() }
    }

    /// The next line, waiting out a reconnect too: after a server restart
    /// `pad watch` may be in its longest pause (10 s, docs/api.md) first.
    fn next(&mut self) -> serde_json::Value {
        match self.rx.recv_timeout(PATIENCE + Duration::from_secs(10)) {
            Ok(line) => {
                self.lines.push(line.clone());
                line
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("no line from pad watch within {PATIENCE:?} and a reconnect")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let (code, stderr) = self.exit();
                panic!("pad watch exited ({code:?}): {stderr}")
            }
        }
    }

    fn assert_quiet(&self) {
        if let Ok(extra) = self.rx.recv_timeout(Duration::from_millis(1500)) {
            panic!("unexpected line from pad watch: {extra}");
        }
    }

    /// Sends SIGINT, as Ctrl-C does; answers with the exit code and stderr.
    fn interrupt(&mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
        self.exit()
    }

    /// Waits for the exit; answers with the exit code and stderr.
    fn exit(&mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut stderr).unwrap();
        (status.code(), stderr)
    }
}

/// A failed test must not leave a watcher running.
impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
