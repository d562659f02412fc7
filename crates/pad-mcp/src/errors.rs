//! The one mapping from an API answer to a tool result: the JSON, or the
//! API's error envelope with the next step for the agent.

use pad_client::ClientError;
use pad_core::api::{ErrorBody, ErrorCode, ErrorEnvelope};
use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::json;

/// The tool result for an API answer: the JSON as structured content, or the
/// API's error envelope (same `code` and `details`) as a tool error.
pub(crate) fn answer<T: Serialize>(result: Result<T, ClientError>) -> Result<CallToolResult, ErrorData> {
    Ok(match result {
        Ok(value) => CallToolResult::structured(serde_json::to_value(value).unwrap_or_default()),
        Err(e) => CallToolResult::structured_error(error_envelope(&e)),
    })
}

/// The one mapping from an API answer to a tool error: the API's envelope,
/// the message followed by the next step.
pub(crate) fn error_envelope(e: &ClientError) -> serde_json::Value {
    match e {
        ClientError::Api { code, message, details, .. } => envelope(*code, message, details.clone()),
        ClientError::Unavailable(m) => envelope(ErrorCode::Unavailable, m, json!({})),
        ClientError::Protocol(m) => envelope(ErrorCode::InternalError, m, json!({})),
    }
}

/// A refusal the tool makes itself, before any call (an argument the API
/// would refuse in a body), in the API's words: the same envelope.
pub(crate) fn refused(e: ErrorBody) -> CallToolResult {
    CallToolResult::structured_error(envelope(e.code, &e.message, e.details))
}

/// `{"error": {code, message, details}}`, as the API writes it.
pub(crate) fn envelope(code: ErrorCode, message: &str, details: serde_json::Value) -> serde_json::Value {
    let message = match next_step(code) {
        Some(next) => format!("{message}. Next: {next}"),
        None => message.to_string(),
    };
    serde_json::to_value(ErrorEnvelope { error: ErrorBody { code, message, details } }).unwrap_or_default()
}

/// What an agent should do after each refusal, appended to the API's message.
pub(crate) fn next_step(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::LeaseHeld => {
            "another worker holds this item (details.holder, details.expires_in_seconds); do not wait for it, \
             call pad_claim_next with autonomous: true for other work"
        }
        ErrorCode::LeaseLost => {
            "your lease is gone (expired or broken); stop working on this item and write nothing more to it, \
             then call pad_claim_next for other work"
        }
        ErrorCode::UpdateConflict => "someone changed the item since you read it; call pad_item_show and retry",
        ErrorCode::NotFound => "check the ref or workspace with pad_item_list or pad_frontier",
        ErrorCode::Unauthorized => "the token was refused; a person must run `pad auth login` or set PAD_TOKEN",
        ErrorCode::Forbidden => "your role does not allow this; ask a workspace owner, or only read",
        ErrorCode::InvalidTtl => "ttl_seconds must be between 1 and 86400",
        ErrorCode::RateLimited | ErrorCode::Unavailable => "wait a few seconds and retry the same call",
        _ => return None,
    })
}

pub(crate) fn unauthorized() -> CallToolResult {
    CallToolResult::structured_error(envelope(ErrorCode::Unauthorized, "missing bearer token", json!({})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_errors_tell_the_agent_what_to_do_next() {
        let e = ClientError::Api {
            status: 409,
            code: ErrorCode::LeaseLost,
            message: "lease lost".into(),
            details: json!({}),
            retry_after: None,
        };
        let message = error_envelope(&e)["error"]["message"].as_str().unwrap().to_string();
        assert!(message.starts_with("lease lost. Next: ") && message.contains("stop working"), "{message}");
    }
}
