//! `pad watch` (docs/api.md, Events): tails a workspace's events, one line each, and
//! outlives a dropped connection — it reconnects with backoff and resumes
//! after the last event it received, so nothing is missed or repeated.
//! `--type` and `--ref` are the stream's `type=` and `ref=`: the server
//! filters (docs/api.md, Events).

use std::time::Duration;

use clap::Args;
use pad_client::{Client, ClientError, EventStream};
use pad_core::api::{ErrorCode, EventsQuery};
use pad_core::{Event, EventKind, ItemRef};

use super::Ctx;
use crate::error::CliError;
use crate::output::{self, Format, timestamp};

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only events of this type, like lease.claimed (repeatable or comma-separated)
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only events about this item (repeatable or comma-separated)
    #[arg(long = "ref", value_name = "REF", value_delimiter = ',')]
    pub refs: Vec<ItemRef>,
    /// Start after this event id; 0 replays the whole log [default: only new events]
    #[arg(long, value_name = "ID")]
    pub after: Option<i64>,
}

/// Events per request while looking for the newest one.
const PAGE: u32 = 1000;
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(10);

pub async fn run(ctx: &Ctx, args: WatchArgs) -> Result<(), CliError> {
    if let Some(bad) = args.types.iter().find(|t| t.parse::<pad_core::EventKind>().is_err()) {
        let known: Vec<&str> = pad_core::EventKind::ALL.iter().map(|k| k.as_str()).collect();
        return Err(CliError::usage(format!(
            "--type {bad:?} is not an event type; the types are: {}",
            known.join(", ")
        )));
    }
    let client = ctx.client()?;
    // A ref that is not in the workspace would wait forever for nothing.
    for r in &args.refs {
        client.item(ctx.ws(), &r.to_string()).await.map_err(super::about(r))?;
    }
    let filter = Filter { types: args.types, refs: args.refs.iter().map(ToString::to_string).collect() };
    let what = |list: &[String], all: &str| if list.is_empty() { all.to_string() } else { list.join(", ") };
    eprintln!(
        "pad watch: watching workspace `{}` at {} for {} on {}{}; Ctrl-C to stop",
        ctx.ws(),
        ctx.settings.url.value.as_str().trim_end_matches('/'),
        what(&filter.types, "every event"),
        what(&filter.refs, "every item"),
        match args.after {
            Some(id) => format!(", from after event {id}"),
            None => String::new(),
        }
    );
    tokio::select! {
        result = tail(ctx, &client, &filter, args.after) => result,
        // Stopping a watch is how it is meant to end.
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Never returns `Ok`: it runs until an error that retrying cannot fix.
async fn tail(ctx: &Ctx, client: &Client, filter: &Filter, after: Option<i64>) -> Result<(), CliError> {
    let ws = ctx.ws();
    let mut cursor = match after {
        Some(id) => id,
        None => newest_id(client, ws).await?,
    };
    // A refusal or an unreachable server at the start is the answer (exit 4, 8…).
    let query = filter.query();
    let mut stream = client.event_stream_where(ws, cursor, &query).await?;
    loop {
        while let Some(next) = stream.next_event().await {
            match next {
                Ok(event) => {
                    cursor = event.id;
                    if filter.keeps(&event) {
                        print(ctx.format, &event)?;
                    }
                }
                // The same event would arrive again after a reconnect.
                Err(e @ ClientError::Protocol(_)) => return Err(e.into()),
                Err(e) => {
                    eprintln!("pad watch: connection lost ({e})");
                    break;
                }
            }
        }
        stream = reconnect(client, ws, cursor, &query).await?;
    }
}

/// The id of the workspace's newest event, so a plain `pad watch` shows only
/// what happens from now on.
async fn newest_id(client: &Client, ws: &str) -> Result<i64, CliError> {
    let mut newest = 0;
    loop {
        let page = client.events(ws, newest, PAGE).await?;
        let Some(last) = page.last() else { return Ok(newest) };
        newest = last.id;
        if page.len() < PAGE as usize {
            return Ok(newest);
        }
    }
}

/// Retries with growing pauses until the server takes the stream again.
async fn reconnect(client: &Client, ws: &str, cursor: i64, query: &EventsQuery) -> Result<EventStream, CliError> {
    let mut pause = FIRST_RETRY;
    // Said once, not on every attempt, until the answer changes.
    let mut said = String::new();
    eprintln!("pad watch: reconnecting (after event {cursor})");
    loop {
        tokio::time::sleep(pause).await;
        match client.event_stream_where(ws, cursor, query).await {
            Ok(stream) => {
                eprintln!("pad watch: reconnected");
                return Ok(stream);
            }
            Err(e) if transient(&e) => {
                pause = next_pause(pause, &e);
                let now = CliError::from(e).to_string();
                if now != said {
                    eprintln!("pad watch: {now}; retrying every {} at most", humantime::format_duration(MAX_RETRY));
                    said = now;
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The pause before the next attempt: twice the last, at most [`MAX_RETRY`],
/// and never shorter than the server's `Retry-After` (a `rate_limited`
/// stream refusal says when a stream frees up; docs/api.md, Limits).
fn next_pause(pause: Duration, e: &ClientError) -> Duration {
    let backoff = (pause * 2).min(MAX_RETRY);
    e.retry_after().map_or(backoff, |asked| asked.max(backoff))
}

/// Worth retrying a connection: the server is down or busy, or a proxy in
/// front of it answered with its own page. A refused token or a missing
/// workspace will not fix itself.
fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Unavailable(_) | ClientError::Protocol(_) => true,
        ClientError::Api { code, .. } => {
            matches!(code, ErrorCode::RateLimited | ErrorCode::Unavailable | ErrorCode::InternalError)
        }
    }
}

/// `--type` and `--ref`: each list, when given, must contain the event's.
struct Filter {
    types: Vec<String>,
    refs: Vec<String>,
}

impl Filter {
    /// The stream's `type=` (any of the types) and `ref=`. The server takes
    /// one ref (docs/api.md, Events); for several it sends every item's
    /// events of those types, and [`keeps`](Self::keeps) picks the refs.
    fn query(&self) -> EventsQuery {
        EventsQuery {
            kind: (!self.types.is_empty()).then(|| self.types.join(",")),
            item_ref: match self.refs.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            },
            ..Default::default()
        }
    }

    /// What the server could not filter: only with several `--ref`s.
    fn keeps(&self, e: &Event) -> bool {
        self.refs.len() < 2
            || e.item_ref.as_deref().is_some_and(|r| self.refs.iter().any(|want| want.eq_ignore_ascii_case(r)))
    }
}

fn print(format: Format, e: &Event) -> Result<(), CliError> {
    let mut line = match format {
        Format::Json => serde_json::to_string(e).map_err(|e| CliError::internal(e.to_string()))?,
        Format::Table => render(e),
    };
    line.push('\n');
    output::print(&line)
}

/// `2026-01-01T00:00:00Z  lease.claimed     TASK-1    o@example.com  runner-a, epoch 1, until …`.
/// Fixed widths: lines are printed as they come, so nothing can be aligned
/// to the widest cell.
fn render(e: &Event) -> String {
    let actor = e.actor.as_deref().unwrap_or("-");
    let item_ref = e.item_ref.as_deref().unwrap_or("-");
    let line = format!("{}  {:<16}  {item_ref:<9}  {actor:<20}  {}", timestamp(e.at), e.kind, summary(e));
    line.trim_end().to_string()
}

/// The few words of an event's data a person wants in the stream.
fn summary(e: &Event) -> String {
    let d = &e.data;
    let text = |k: &str| d.get(k).and_then(|v| v.as_str());
    // Times in whole seconds, as everywhere else in human output.
    let time =
        |k: &str| text(k).map(|t| t.parse::<chrono::DateTime<chrono::Utc>>().map_or_else(|_| t.to_string(), timestamp));
    let lease = || {
        let holder = text("holder").unwrap_or("?");
        let epoch = d.get("epoch").map(ToString::to_string).unwrap_or_else(|| "?".into());
        format!("{holder}, epoch {epoch}")
    };
    match e.kind {
        EventKind::ItemCreated => text("title").unwrap_or_default().to_string(),
        EventKind::ItemUpdated => match d.get("fields").and_then(|f| f.as_array()) {
            Some(fields) => {
                let names: Vec<&str> = fields.iter().filter_map(|f| f.as_str()).collect();
                format!("changed {}", names.join(", "))
            }
            None => String::new(),
        },
        EventKind::CommentCreated => d.get("comment_id").map(|id| format!("comment #{id}")).unwrap_or_default(),
        EventKind::LeaseClaimed => match time("expires_at") {
            Some(until) => format!("{}, until {until}", lease()),
            None => lease(),
        },
        EventKind::LeaseReleased => lease(),
        // L19: an expiry at the cap says so.
        EventKind::LeaseExpired if text("cause") == Some("max_hold") => format!("{}, at its max hold", lease()),
        EventKind::LeaseExpired => lease(),
        // L14: the count, when it may be tried again, and why it failed.
        EventKind::LeaseFailed => {
            let failures = d.get("failures").map(ToString::to_string).unwrap_or_else(|| "?".into());
            let retry = time("retry_at").map(|t| format!(", retry after {t}")).unwrap_or_default();
            let note = text("note").map(|n| format!(": {n}")).unwrap_or_default();
            format!("{}, failure {failures}{retry}{note}", lease())
        }
        EventKind::LeaseBroken => format!("{}: {}", lease(), text("reason").unwrap_or("no reason")),
        EventKind::ItemQuarantined => text("reason").unwrap_or_default().to_string(),
        _ if d.is_null() || d.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        _ => d.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn event(kind: &str, item_ref: Option<&str>, actor: Option<&str>, data: serde_json::Value) -> Event {
        Event {
            id: 1,
            kind: kind.parse().expect("a known event kind"),
            item_ref: item_ref.map(Into::into),
            actor: actor.map(Into::into),
            at: chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            data,
        }
    }

    #[test]
    fn a_failure_and_a_capped_expiry_are_summed_up_in_words() {
        let failed = event(
            "lease.failed",
            Some("TASK-1"),
            None,
            json!({"holder": "ci-7", "epoch": 2, "lease_id": 9, "failures": 3, "retry_at": "2026-01-01T00:02:00.123456Z", "note": "`make` exited 2"}),
        );
        assert_eq!(summary(&failed), "ci-7, epoch 2, failure 3, retry after 2026-01-01T00:02:00Z: `make` exited 2");
        let capped =
            event("lease.expired", Some("TASK-1"), None, json!({"holder": "a", "epoch": 1, "cause": "max_hold"}));
        assert_eq!(summary(&capped), "a, epoch 1, at its max hold");
    }

    #[test]
    fn lines_have_time_type_ref_actor_and_summary() {
        let claimed = event(
            "lease.claimed",
            Some("TASK-1"),
            Some("o@example.com"),
            json!({"holder": "runner-a", "epoch": 2, "session_id": null, "expires_at": "2026-01-01T00:15:00Z"}),
        );
        assert_eq!(
            render(&claimed),
            "2026-01-01T00:00:00Z  lease.claimed     TASK-1     o@example.com         runner-a, epoch 2, until 2026-01-01T00:15:00Z"
        );
        let expired = event("lease.expired", Some("TASK-1"), None, json!({"holder": "runner-a", "epoch": 2}));
        assert!(
            render(&expired).ends_with("TASK-1     -                     runner-a, epoch 2"),
            "{}",
            render(&expired)
        );
        let updated = event("item.updated", Some("BUG-3"), Some("a@x"), json!({"fields": ["title", "status"]}));
        assert!(render(&updated).ends_with("changed title, status"));
        assert!(!render(&event("item.deleted", Some("BUG-3"), Some("a@x"), json!({}))).ends_with(' '));
    }

    fn filter(types: &[&str], refs: &[&str]) -> Filter {
        Filter {
            types: types.iter().map(|s| s.to_string()).collect(),
            refs: refs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_filters_go_to_the_server() {
        let query = |f: Filter| {
            let q = f.query();
            (q.kind, q.item_ref, q.after, q.limit)
        };
        assert_eq!(query(filter(&[], &[])), (None, None, None, None));
        assert_eq!(
            query(filter(&["item.created", "lease.claimed"], &["TASK-1"])),
            (Some("item.created,lease.claimed".into()), Some("TASK-1".into()), None, None)
        );
        // The server takes one ref: several are kept here, types still there.
        assert_eq!(
            query(filter(&["lease.claimed"], &["TASK-1", "TASK-2"])),
            (Some("lease.claimed".into()), None, None, None)
        );
    }

    #[test]
    fn only_several_refs_are_checked_here() {
        let e = |r: Option<&str>| event("lease.claimed", r, None, json!({}));
        assert!(filter(&["item.created"], &[]).keeps(&e(Some("TASK-1"))), "the server filtered the types");
        assert!(filter(&[], &["TASK-2"]).keeps(&e(Some("TASK-1"))), "the server filtered the one ref");
        assert!(filter(&[], &["task-1", "TASK-2"]).keeps(&e(Some("TASK-1"))));
        assert!(!filter(&[], &["TASK-3", "TASK-2"]).keeps(&e(Some("TASK-1"))));
        assert!(!filter(&[], &["TASK-1", "TASK-2"]).keeps(&e(None)));
    }

    #[test]
    fn a_reconnect_waits_as_long_as_retry_after_says() {
        let limited = |secs| ClientError::Api {
            status: 429,
            code: ErrorCode::RateLimited,
            message: String::new(),
            details: json!({}),
            retry_after: secs,
        };
        assert_eq!(next_pause(FIRST_RETRY, &limited(Some(5))), Duration::from_secs(5));
        // The server's word is a floor, never a shortcut past the backoff.
        assert_eq!(next_pause(Duration::from_secs(8), &limited(Some(1))), MAX_RETRY);
        assert_eq!(next_pause(FIRST_RETRY, &limited(None)), FIRST_RETRY * 2);
        assert_eq!(next_pause(FIRST_RETRY, &ClientError::Unavailable("refused".into())), FIRST_RETRY * 2);
    }

    #[test]
    fn only_outages_are_retried() {
        let api = |code: ErrorCode| ClientError::Api {
            status: code.http_status(),
            code,
            message: String::new(),
            details: json!({}),
            retry_after: None,
        };
        assert!(transient(&ClientError::Unavailable("refused".into())));
        assert!(transient(&api(ErrorCode::RateLimited)));
        assert!(!transient(&api(ErrorCode::Unauthorized)));
        assert!(!transient(&api(ErrorCode::NotFound)));
    }
}
