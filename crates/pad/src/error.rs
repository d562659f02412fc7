//! How a command fails: a typed code (the API's, or pad's own), a message
//! for stderr, and the exit code of README.md's table (`exit.rs`).

use chrono::{DateTime, Utc};
use pad_client::ClientError;
use pad_core::ItemRef;
use pad_core::api::ErrorCode;

pub use crate::exit::Exit;
use crate::output::{in_words, timestamp};

/// The server this process talks to and where that came from, e.g.
/// "http://127.0.0.1:7777 (from profile `default`)", set once when the
/// client is made: an unreachable server is then named in the error.
static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn set_server(described: String) {
    let _ = SERVER.set(described);
}

/// What went wrong, as a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The API's code: the server refused with it, or the client saw no
    /// answer (`unavailable`) or one that made no sense (`internal_error`).
    Api(ErrorCode),
    /// pad's own failure, with no refusal of the server behind it.
    Own(Exit),
}

impl Code {
    pub fn of(e: &ClientError) -> Code {
        Code::Api(match e {
            ClientError::Api { code, .. } => *code,
            ClientError::Unavailable(_) => ErrorCode::Unavailable,
            ClientError::Protocol(_) => ErrorCode::InternalError,
        })
    }

    pub fn exit(self) -> Exit {
        match self {
            Code::Api(code) => Exit::of(code),
            Code::Own(exit) => exit,
        }
    }
}

/// The server's `{"error": {...}}` refusal as it came: with `--format json`
/// a failed command prints it on stdout (docs/api.md, "Errors"), so a script
/// keeps every detail (holder, epoch, `expires_in_seconds`) that the
/// sentence on stderr summarises.
#[derive(Debug, Clone)]
pub struct Refusal {
    message: String,
    details: serde_json::Value,
}

/// The TTL flag the user typed when it counts whole minutes or hours, with
/// its unit in seconds: a refused TTL is then said in that flag's own terms,
/// not as `--ttl`, which they never typed. Only pad's own arguments count
/// (what follows `--` is CMD's), and only one such flag: with both, the TTL
/// is their sum, said in seconds.
fn ttl_flag_typed() -> Option<(&'static str, i64, &'static str)> {
    let ours: Vec<String> = std::env::args().take_while(|a| a != "--").collect();
    let typed = |flag: &str| ours.iter().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    let mut found =
        [("--ttl-minutes", 60, "minutes"), ("--ttl-hours", 3600, "hours")].into_iter().filter(|(flag, ..)| typed(flag));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// A person's words for "nothing answered": where, and the likely fix.
pub fn no_answer(cause: &str) -> String {
    let at = SERVER.get().map_or("the server", String::as_str);
    // "Connection refused" is what the sentence already says.
    let cause = if cause.to_ascii_lowercase().contains("refused") { String::new() } else { format!(" ({cause})") };
    format!("no pad server answers at {at}{cause} — is `pad serve` running?")
}

#[derive(Debug)]
pub enum CliError {
    /// stdout was closed (`pad item list | head`): not an error, stop quietly.
    ClosedPipe,
    /// End with this code and print nothing more: the command has already
    /// said what happened, or the code is a child's, passed on (`pad run`).
    Exit(i32),
    /// A failure: `main` prints `message` and exits with `code`'s exit code.
    Failed {
        code: Code,
        message: String,
        /// The server's refusal, when the failure is one (boxed: errors
        /// travel in every `Result`, refusals are rare).
        refusal: Option<Box<Refusal>>,
    },
}

impl CliError {
    /// pad's own failure.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError::Failed { code: Code::Own(exit), message: message.into(), refusal: None }
    }
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(Exit::Config, message)
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Exit::Internal, message)
    }

    /// The client's error in pad's words: its code, and the server's refusal
    /// for `--format json`, are kept.
    pub fn reworded(e: &ClientError, message: String) -> Self {
        let refusal = match e {
            ClientError::Api { message, details, .. } => {
                Some(Box::new(Refusal { message: message.clone(), details: details.clone() }))
            }
            ClientError::Unavailable(_) | ClientError::Protocol(_) => None,
        };
        CliError::Failed { code: Code::of(e), message, refusal }
    }

    /// The process's exit code.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::ClosedPipe => 0,
            CliError::Exit(code) => *code,
            CliError::Failed { code, .. } => code.exit().code(),
        }
    }

    /// Whether this is a failure that exits with `exit`.
    pub fn exits_with(&self, exit: Exit) -> bool {
        matches!(self, CliError::Failed { code, .. } if code.exit() == exit)
    }

    /// The message rewritten (a next step added, what was not done): the
    /// code and the server's refusal stay.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            CliError::Failed { code, message, refusal } => CliError::Failed { code, message: f(message), refusal },
            other => other,
        }
    }

    /// The message with a next step appended.
    pub fn with_hint(self, hint: &str) -> Self {
        self.map_message(|m| format!("{m}{hint}"))
    }

    /// What `--format json` prints on stdout for a failure: the server's
    /// envelope if the server refused, else one in the same shape.
    pub fn json_envelope(&self) -> serde_json::Value {
        let (code, message, details) = match self {
            CliError::Failed { code: Code::Api(code), refusal: Some(r), .. } => {
                (code.as_str(), r.message.as_str(), r.details.clone())
            }
            CliError::Failed { code, message, .. } => {
                let name = match code {
                    Code::Api(code) => code.as_str(),
                    Code::Own(exit) => exit.json_code(),
                };
                (name, message.as_str(), serde_json::json!({}))
            }
            CliError::ClosedPipe | CliError::Exit(_) => ("internal_error", "", serde_json::json!({})),
        };
        serde_json::json!({ "error": { "code": code, "message": message, "details": details } })
    }

    /// A client error on one item, worded for a person: lease conflicts say
    /// who holds the item and until when (docs/leases.md L2), so a loser can move on.
    pub fn for_item(item_ref: &ItemRef, e: ClientError) -> Self {
        let message = if let Some(held) = e.held_lease() {
            let session = held.session_id.map(|s| format!(", session {s}")).unwrap_or_default();
            format!(
                "{item_ref} is leased by {}{session} (epoch {}) until {} (in {})",
                held.holder,
                held.epoch,
                timestamp(held.expires_at),
                in_words(held.expires_in_seconds)
            )
        } else if let Some(how) = e.ended_lease().filter(|l| l.ended == pad_core::LeaseEnd::Broken) {
            // L7: the holder is told why, in the owner's words.
            let now = match e.current_lease().flatten() {
                Some(l) => format!("; {} holds it now (epoch {})", l.holder, l.epoch),
                None => String::new(),
            };
            format!(
                "lease on {item_ref} lost: {} broke it at {}: {}{now}",
                how.broken_by.as_deref().unwrap_or("an owner"),
                timestamp(how.ended_at),
                how.reason.as_deref().unwrap_or("no reason given"),
            )
        } else if let Some(current) = e.current_lease() {
            match current {
                Some(l) => format!(
                    "lease on {item_ref} lost: the live lease is epoch {}, held by {} until {}",
                    l.epoch,
                    l.holder,
                    timestamp(l.expires_at)
                ),
                None => match e.ended_lease() {
                    Some(l) if l.ended == pad_core::LeaseEnd::Expired => {
                        format!("lease on {item_ref} lost: it expired at {}", timestamp(l.ended_at))
                    }
                    Some(l) => format!("lease on {item_ref} lost: it was {} at {}", l.ended, timestamp(l.ended_at)),
                    None => format!("lease on {item_ref} lost: no live lease (it expired or was released)"),
                },
            }
        } else if let ClientError::Api { code: ErrorCode::UpdateConflict, details, .. } = &e {
            // README "Times": whole seconds and the distance from now, never
            // the API's microseconds.
            let at = |k: &str| details.get(k).and_then(|v| v.as_str()).and_then(|t| t.parse::<DateTime<Utc>>().ok());
            match (at("expected_updated_at"), at("actual_updated_at")) {
                (Some(expected), Some(actual)) => format!(
                    "{item_ref} has changed: it was last updated at {}, not {}; `pad item show {item_ref}` shows it now, then retry",
                    crate::output::at(actual, Utc::now()),
                    timestamp(expected)
                ),
                _ => format!("{item_ref} has changed; `pad item show {item_ref}` shows it now, then retry"),
            }
        } else {
            return e.into();
        };
        Self::reworded(&e, message)
    }
}

impl CliError {
    /// `for_item` for a call that named a lease (`--epoch`, `--lease-id`): when
    /// the item's live lease is another one and the server knows no lease of
    /// the caller's that ended (docs/leases.md L7, "Told why"), the handle
    /// simply does not match — the caller never held that lease, so nothing
    /// was lost. The message names the live lease instead.
    pub fn for_lease(item_ref: &ItemRef, epoch: Option<i64>, lease_id: Option<i64>, e: ClientError) -> Self {
        if let (Some(Some(live)), None) = (e.current_lease(), e.ended_lease()) {
            let given = match (lease_id, epoch) {
                (Some(id), _) if id != live.lease_id => Some(format!("lease {id}")),
                (_, Some(n)) if n != live.epoch => Some(format!("epoch {n}")),
                _ => None,
            };
            if let Some(given) = given {
                let message = format!(
                    "{given} does not match the live lease on {item_ref}: lease {}, epoch {}, held by {} until {}",
                    live.lease_id,
                    live.epoch,
                    live.holder,
                    timestamp(live.expires_at)
                );
                return Self::reworded(&e, message);
            }
        }
        Self::for_item(item_ref, e)
    }
}

/// The message, as `main` prints it after `error: `.
impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Failed { message, .. } => f.write_str(message),
            CliError::ClosedPipe => f.write_str("closed pipe"),
            CliError::Exit(code) => write!(f, "exit {code}"),
        }
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        let message = match &e {
            ClientError::Api { code: ErrorCode::Unauthorized, message, .. } => {
                format!("{message} (the token was refused: check PAD_TOKEN or run `pad auth login`)")
            }
            ClientError::Api { code: ErrorCode::ValidationFailed, message, details, .. } => {
                match details.get("field").and_then(|f| f.as_str()) {
                    Some(field) if !message.contains(field) => format!("{field}: {message}"),
                    _ => message.clone(),
                }
            }
            ClientError::Api { retry_after: Some(secs), code: ErrorCode::RateLimited, message, .. } => {
                format!("{message} (retry in {})", in_words(*secs as i64))
            }
            ClientError::Unavailable(cause) => no_answer(cause),
            ClientError::Api { code: ErrorCode::InvalidTtl, message, details, .. } => {
                let secs = |k: &str| details.get(k).and_then(serde_json::Value::as_i64);
                match (secs("max_seconds"), secs("requested_seconds"), ttl_flag_typed()) {
                    (Some(max), Some(got), Some((flag, unit, name))) => format!(
                        "`{flag}` must be between 1 and {} ({name}; the workspace maximum is {}); got {}",
                        max / unit,
                        in_words(max),
                        got / unit
                    ),
                    (Some(max), Some(got), None) => format!(
                        "`--ttl` must be between 1s and {} (the workspace maximum); got {}",
                        in_words(max),
                        if got < 0 { format!("{got}s") } else { in_words(got) }
                    ),
                    _ => message.clone(),
                }
            }
            _ => e.to_string(),
        };
        CliError::reworded(&e, message)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::ClosedPipe
        } else {
            CliError::internal(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn api(code: ErrorCode, details: serde_json::Value) -> ClientError {
        ClientError::Api { status: code.http_status(), code, message: "refused".into(), details, retry_after: None }
    }

    fn failed(e: CliError) -> (String, i32) {
        match e {
            e @ CliError::Failed { .. } => (e.to_string(), e.exit_code()),
            CliError::ClosedPipe | CliError::Exit(_) => panic!("not a failure"),
        }
    }

    #[test]
    fn lease_held_names_holder_and_expiry() {
        let e = api(
            ErrorCode::LeaseHeld,
            json!({"holder": "runner-a", "session_id": null, "epoch": 1,
                   "acquired_at": "2026-01-01T00:00:00Z", "renewed_at": "2026-01-01T00:00:00Z",
                   "expires_at": "2026-01-01T00:15:00Z", "expires_in_seconds": 840}),
        );
        let (message, code) = failed(CliError::for_item(&"task-1".parse().unwrap(), e));
        assert_eq!(code, 7);
        assert_eq!(message, "TASK-1 is leased by runner-a (epoch 1) until 2026-01-01T00:15:00Z (in 14m)");
    }

    #[test]
    fn other_errors_keep_the_server_message_and_code() {
        let (message, code) =
            failed(CliError::for_item(&"TASK-1".parse().unwrap(), api(ErrorCode::NotFound, json!({}))));
        assert_eq!((message.as_str(), code), ("refused", 5));
        let (message, code) = failed(api(ErrorCode::ValidationFailed, json!({"field": "title"})).into());
        assert_eq!((message.as_str(), code), ("title: refused", 2));
        let (_, code) = failed(ClientError::Unavailable("refused".into()).into());
        assert_eq!(code, 8);
    }

    #[test]
    fn lease_lost_says_how_the_callers_lease_ended() {
        let ended = |how: &str, reason: serde_json::Value| {
            json!({"current": null, "ended": {"lease_id": 4, "epoch": 2, "holder": "w", "session_id": null,
                "acquired_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:05:00Z", "ended": how,
                "note": null, "reason": reason, "broken_by": "o@x"}})
        };
        let r: ItemRef = "TASK-1".parse().unwrap();
        let (m, code) = failed(CliError::for_item(&r, api(ErrorCode::LeaseLost, ended("broken", json!("freeze")))));
        assert_eq!((m.as_str(), code), ("lease on TASK-1 lost: o@x broke it at 2026-01-01T00:05:00Z: freeze", 7));
        let (m, _) = failed(CliError::for_item(&r, api(ErrorCode::LeaseLost, ended("expired", json!(null)))));
        assert_eq!(m, "lease on TASK-1 lost: it expired at 2026-01-01T00:05:00Z");
        let (m, _) = failed(CliError::for_item(&r, api(ErrorCode::LeaseLost, json!({"current": null, "ended": null}))));
        assert_eq!(m, "lease on TASK-1 lost: no live lease (it expired or was released)");
    }

    #[test]
    fn json_prints_the_servers_refusal_or_one_of_the_same_shape() {
        let details = json!({"holder": "runner-a", "session_id": null, "epoch": 1,
            "acquired_at": "2026-01-01T00:00:00Z", "renewed_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-01T00:15:00Z", "expires_in_seconds": 840});
        let e = CliError::for_item(&"TASK-1".parse().unwrap(), api(ErrorCode::LeaseHeld, details.clone()))
            .with_hint("; try another");
        assert_eq!(
            e.json_envelope(),
            json!({"error": {"code": "lease_held", "message": "refused", "details": details}})
        );
        let e = CliError::config("no token");
        assert_eq!(e.json_envelope(), json!({"error": {"code": "config_error", "message": "no token", "details": {}}}));
        let e: CliError = ClientError::Unavailable("reset".into()).into();
        assert_eq!(e.json_envelope()["error"]["code"], "unavailable");
        assert_eq!(e.exit_code(), 8);
    }

    #[test]
    fn broken_pipe_is_quiet() {
        let e: CliError = std::io::Error::from(std::io::ErrorKind::BrokenPipe).into();
        assert!(matches!(e, CliError::ClosedPipe));
    }
}
