//! `pad webhook add|list|remove|resume|test|deliveries` (docs/webhooks.md).

use clap::Subcommand;
use pad_core::webhook::{CreateWebhook, Webhook, WebhookDelivery};

use super::Ctx;
use crate::error::CliError;
use crate::output::{table, when};

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Subscribe a URL and print its signing secret (shown only once)
    Add {
        /// An http:// or https:// URL (not `url`: that id is the global --url)
        #[arg(value_name = "URL")]
        target: String,
        /// Deliver only this event type (repeatable) [default: every type]
        #[arg(long = "event", value_name = "TYPE")]
        events: Vec<pad_core::EventKind>,
    },
    /// The workspace's webhooks (never their secrets)
    List,
    /// Unsubscribe (pending deliveries and the log go too)
    Remove {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
    },
    /// Resume a paused webhook: its queued events are sent again, oldest first
    Resume {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
    },
    /// Send a webhook.test delivery now and show how it went
    Test {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
    },
    /// The delivery log of a webhook, newest first
    Deliveries {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
        /// How many [default: 50, at most 500]
        #[arg(long)]
        limit: Option<u32>,
    },
}

/// `pad webhook remove|test|deliveries ID`.
fn webhook_id(s: &str) -> Result<i64, String> {
    s.parse().map_err(|_| format!("webhook id must be a number, like 3 (`pad webhook list` shows them), not {s:?}"))
}

pub async fn run(ctx: &Ctx, cmd: WebhookCommand) -> Result<(), CliError> {
    let client = ctx.client()?;
    match cmd {
        WebhookCommand::Add { target, events } => {
            let created = client.create_webhook(ctx.ws(), &CreateWebhook { url: target, events }).await?;
            eprintln!(
                "Webhook {} delivers to {}: its signing secret is shown only this once, so keep it now",
                created.webhook.id, created.webhook.url
            );
            // Only the secret on stdout, so `SECRET=$(pad webhook add URL)` works.
            ctx.emit(&created, |c| format!("{}\n", c.secret))
        }
        WebhookCommand::List => {
            let list = client.webhooks(ctx.ws()).await?;
            ctx.emit(&list, |l| table(LIST_HEADERS, &l.webhooks.iter().map(list_row).collect::<Vec<_>>()))
        }
        WebhookCommand::Resume { id } => {
            let w = client.resume_webhook(ctx.ws(), id).await?;
            ctx.emit(&w, |w| table(LIST_HEADERS, &[list_row(w)]))
        }
        WebhookCommand::Remove { id } => {
            client.delete_webhook(ctx.ws(), id).await?;
            ctx.emit(&serde_json::json!({ "id": id, "removed": true }), |_| format!("Removed webhook {id}\n"))
        }
        WebhookCommand::Test { id } => {
            let d = client.test_webhook(ctx.ws(), id).await?;
            ctx.emit(&d, |d| table(HEADERS, &[row(d)]))
        }
        WebhookCommand::Deliveries { id, limit } => {
            let list = client.webhook_deliveries(ctx.ws(), id, limit).await?;
            ctx.emit(&list, |l| table(HEADERS, &l.deliveries.iter().map(row).collect::<Vec<_>>()))
        }
    }
}

const LIST_HEADERS: &[&str] = &["ID", "URL", "EVENTS", "STATE", "PENDING", "DROPPED", "CREATED"];

fn list_row(w: &Webhook) -> Vec<String> {
    let events = if w.events.is_empty() {
        "all".to_string()
    } else {
        w.events.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(",")
    };
    let state = if w.paused { "paused" } else { "active" };
    vec![
        w.id.to_string(),
        w.url.clone(),
        events,
        state.to_string(),
        w.pending.to_string(),
        w.dropped.to_string(),
        when(w.created_at, chrono::Utc::now()),
    ]
}

const HEADERS: &[&str] = &["AT", "EVENT", "TYPE", "ATTEMPT", "STATUS", "OUTCOME", "MS", "ERROR"];

fn row(d: &WebhookDelivery) -> Vec<String> {
    vec![
        when(d.at, chrono::Utc::now()),
        d.event_id.map_or_else(|| "-".into(), |e| e.to_string()),
        d.event_type.clone(),
        d.attempt.to_string(),
        d.status_code.map_or_else(|| "-".into(), |s| s.to_string()),
        d.outcome.to_string(),
        d.duration_ms.to_string(),
        d.error.clone().unwrap_or_default(),
    ]
}
