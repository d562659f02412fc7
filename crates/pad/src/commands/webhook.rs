//! `pad webhook add|list|remove|resume|test|deliveries` (docs/webhooks.md).

use pad_core::webhook::{CreateWebhook, Webhook, WebhookDelivery};

use super::Ctx;
use crate::cli::WebhookCommand;
use crate::error::CliError;
use crate::output::{table, when};

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
