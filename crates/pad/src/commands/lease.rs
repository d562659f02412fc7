//! `pad item claim|renew|release`: the execution lease (SPEC §2). The server
//! decides everything on its own clock; these only shape requests and words.

use chrono::Utc;
use pad_client::Client;
use pad_core::api::{ClaimBody, ReleaseBody, RenewBody};
use pad_core::{ItemRef, Lease};

use super::{Ctx, about};
use crate::cli::{ClaimArgs, ReleaseArgs, RenewArgs};
use crate::error::CliError;
use crate::output::{in_words, seconds_until, timestamp};

pub async fn claim(ctx: &Ctx, client: &Client, a: ClaimArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let body = ClaimBody {
        holder: a.holder.holder,
        session_id: a.session,
        ttl_seconds: a.ttl.seconds().map(Into::into),
        note: a.note,
    };
    let claimed = client.claim(ctx.ws(), &r.to_string(), &body).await.map_err(about(r))?;
    ctx.emit(&claimed, |c| {
        let verb = if c.refreshed { "Refreshed" } else { "Claimed" };
        let mut out = lease_line(verb, r, &c.lease);
        if let Some(note) = &c.previous_note {
            let by = c.previous_holder.as_deref().map(|h| format!(" from {h}")).unwrap_or_default();
            out.push_str(&format!("Previous note{by}: {note}\n"));
        }
        out
    })
}

pub async fn renew(ctx: &Ctx, client: &Client, a: RenewArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let body = RenewBody {
        epoch: a.epoch,
        holder: a.holder.holder,
        ttl_seconds: a.ttl.seconds().map(Into::into),
        note: a.note,
    };
    let renewed = client.renew(ctx.ws(), &r.to_string(), &body).await.map_err(about(r))?;
    ctx.emit(&renewed, |rn| lease_line("Renewed", r, &rn.lease))
}

pub async fn release(ctx: &Ctx, client: &Client, a: ReleaseArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let body = ReleaseBody { holder: a.holder.holder, epoch: a.epoch, force: a.force, reason: a.reason };
    let released = client.release(ctx.ws(), &r.to_string(), &body).await.map_err(about(r))?;
    // Nothing to release is not a failure (L6): exit 0 either way.
    ctx.emit(&released, |rel| match (rel.released, rel.reason.as_str()) {
        (true, "broken") => format!("Lease broken on {r}\n"),
        (true, _) => "Lease released\n".to_string(),
        (false, _) => "No live lease\n".to_string(),
    })
}

/// `Claimed TASK-1: runner-a, epoch 1, expires 2026-…Z (in 15m)`.
fn lease_line(verb: &str, r: &ItemRef, l: &Lease) -> String {
    let session = l.session_id.as_deref().map(|s| format!(", session {s}")).unwrap_or_default();
    let left = in_words(seconds_until(l.expires_at, Utc::now()));
    format!("{verb} {r}: {}{session}, epoch {}, expires {} (in {left})\n", l.holder, l.epoch, timestamp(l.expires_at))
}
