//! `pad item claim|renew|release|claim-next|frontier`: the execution lease
//! (docs/leases.md). The server decides everything on its own clock; these only
//! shape requests and words.

use chrono::Utc;
use clap::Args;
use pad_client::{Client, ClientError};
use pad_core::api::{
    CLAIM_NEXT_COUNT_MAX, CLAIM_NEXT_WAIT_MAX_SECONDS, ClaimBody, ClaimNextBody, ClaimNextResponse, CompleteBody,
    ErrorBody, FailBody, FrontierQuery, ReleaseBody, RenewBody, TtlSeconds,
};
use pad_core::{FrontierFilter, ItemRef, Lease, Priority, Status};

use super::item::{RefArg, parse_limit};
use super::{Ctx, about};
use crate::error::{CliError, Exit};
use crate::output;
use crate::ttl;

/// The lease a fenced lease call names: its epoch, its lease id, or both
/// (then both must match).
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub struct LeaseHandleArgs {
    /// The epoch your claim returned
    #[arg(long, value_name = "N")]
    pub epoch: Option<i64>,
    /// The lease id your claim returned
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<i64>,
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub handle: LeaseHandleArgs,
    #[command(flatten)]
    pub holder: HolderArg,
    /// The status to set: done, cancelled, open, in-progress [default: done]
    #[arg(long)]
    pub status: Option<Status>,
    // Last: its filters' help heading would cover the options after it.
    #[command(flatten)]
    pub next: NextArgs,
}

#[derive(Debug, Args)]
pub struct FailArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub handle: LeaseHandleArgs,
    #[command(flatten)]
    pub holder: HolderArg,
    /// What went wrong, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    /// Quarantine at this many failures instead of the workspace's setting
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
    // Last: its filters' help heading would cover the options after it.
    #[command(flatten)]
    pub next: NextArgs,
}

/// The lease duration: one of three spellings (docs/leases.md L8).
#[derive(Debug, Default, Args)]
#[group(multiple = false)]
pub struct TtlArgs {
    /// Lease duration with a unit: 90s, 30m, 1h30m [default: the workspace's default TTL]
    // Hyphen values reach the parser, which says why `-5m` is no TTL
    // (clap would suggest `-- -5m`, which is wrong here).
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true)]
    pub ttl: Option<u64>,
    /// Lease duration in minutes
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub ttl_minutes: Option<u32>,
    /// Lease duration in hours
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub ttl_hours: Option<u32>,
}

impl TtlArgs {
    /// The TTL asked for, as the API takes it; the server checks its bounds.
    pub fn seconds(&self) -> Option<TtlSeconds> {
        let secs =
            self.ttl.or(self.ttl_minutes.map(|m| u64::from(m) * 60)).or(self.ttl_hours.map(|h| u64::from(h) * 3600));
        secs.map(TtlSeconds::from)
    }
}

/// Who holds the lease. The variables let a worker set them once.
#[derive(Debug, Args)]
pub struct HolderArg {
    /// Worker label [default: your email]
    #[arg(long, env = "PAD_HOLDER", hide_env_values = true, value_name = "HOLDER")]
    pub holder: Option<String>,
}

#[derive(Debug, Args)]
pub struct ClaimArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub holder: HolderArg,
    /// Names one run of the holder
    #[arg(long, env = "PAD_SESSION_ID", hide_env_values = true, value_name = "ID")]
    pub session: Option<String>,
    #[command(flatten)]
    pub ttl: TtlArgs,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    /// Refuse (exit 7) even if you already hold the lease, instead of refreshing it
    #[arg(long)]
    pub no_refresh: bool,
    #[command(flatten)]
    pub max_hold: MaxHoldArg,
}

/// L19: a cap on how long a lease may be held, renewals included.
#[derive(Debug, Default, Args)]
pub struct MaxHoldArg {
    /// Hold the lease at most this long, renewals included, like 2h (at least the TTL,
    /// at most the workspace's max hold) [default: the workspace's, if any]
    #[arg(long = "max-hold", value_name = "DURATION", value_parser = ttl::parse)]
    pub seconds: Option<u64>,
}

impl MaxHoldArg {
    pub fn seconds(&self) -> Option<i64> {
        self.seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
    }
}

#[derive(Debug, Args)]
pub struct RenewArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub handle: LeaseHandleArgs,
    #[command(flatten)]
    pub holder: HolderArg,
    /// `pad item renew` says its default: the lease's own TTL.
    #[command(flatten)]
    pub ttl: TtlArgs,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub holder: HolderArg,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N")]
    pub epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<i64>,
    /// Break another worker's lease (workspace owners); on your own lease, a plain
    /// release whose event keeps the reason
    #[arg(long, requires = "reason")]
    pub force: bool,
    /// Why the lease is broken, recorded in the event
    #[arg(long, requires = "force")]
    pub reason: Option<String>,
    // Last: its filters' help heading would cover the options after it.
    #[command(flatten)]
    pub next: NextArgs,
}

/// `--next` on `complete`, `fail` and `release`: once the lease has ended,
/// the same request claims the next ready item for the same holder
/// (docs/api.md, "The next item in the same call").
#[derive(Debug, Default, Args)]
pub struct NextArgs {
    /// Once the lease has ended, claim the next ready item in the same request, for the same
    /// holder; the filters below choose it
    #[arg(long)]
    pub next: bool,
    /// The next lease's duration, like 10m [default: the workspace's default TTL]
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true, requires = "next")]
    pub next_ttl: Option<u64>,
    /// Names one run of the holder, for the next lease (no effect without --next)
    #[arg(long, env = "PAD_SESSION_ID", hide_env_values = true, value_name = "ID")]
    pub session: Option<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

impl NextArgs {
    /// The end's `next`: a claim-next of one item that does not wait, or
    /// none without `--next`; filters without `--next` are a usage error,
    /// since they would be ignored.
    fn body(self, holder: Option<&String>) -> Result<Option<ClaimNextBody>, CliError> {
        if !self.next {
            if self.filter.is_set() {
                return Err(CliError::usage("the filters (--kind, --label, …) choose the next item: add --next"));
            }
            return Ok(None);
        }
        Ok(Some(ClaimNextBody {
            filter: filter(self.filter),
            holder: holder.cloned(),
            session_id: self.session,
            ttl_seconds: self.next_ttl.map(TtlSeconds::from),
            ..ClaimNextBody::default()
        }))
    }
}

/// Which ready items qualify (docs/leases.md L11); shared by `frontier`, `claim-next`
/// and `drain`.
#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Filters")]
pub struct FilterArgs {
    /// Any of these kinds (repeatable or comma-separated)
    #[arg(long = "kind", value_name = "KIND", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Items with all of these labels (repeatable or comma-separated)
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Items with none of these labels (repeatable or comma-separated)
    #[arg(long = "without-label", value_name = "LABEL", value_delimiter = ',')]
    pub without_labels: Vec<String>,
    /// low, medium, high, critical: this or higher
    #[arg(long, value_name = "PRIORITY")]
    pub min_priority: Option<Priority>,
    /// Only children of this item
    #[arg(long, value_name = "REF")]
    pub parent: Option<ItemRef>,
    /// Skip items labelled `needs-human`, as autonomous workers should
    #[arg(long)]
    pub autonomous: bool,
    /// Skip these items (repeatable or comma-separated)
    #[arg(long = "exclude", value_name = "REF", value_delimiter = ',')]
    pub exclude: Vec<ItemRef>,
}

impl FilterArgs {
    /// Whether any filter was given.
    fn is_set(&self) -> bool {
        let FilterArgs { kinds, labels, without_labels, min_priority, parent, autonomous, exclude } = self;
        !kinds.is_empty()
            || !labels.is_empty()
            || !without_labels.is_empty()
            || min_priority.is_some()
            || parent.is_some()
            || *autonomous
            || !exclude.is_empty()
    }
}

#[derive(Debug, Args)]
pub struct FrontierArgs {
    /// How many items, at least 1 (the server caps it)
    #[arg(long, value_name = "N", value_parser = parse_limit)]
    pub limit: Option<u32>,
    // Last: its help heading would cover the options after it.
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Args)]
pub struct ClaimNextArgs {
    #[command(flatten)]
    pub holder: HolderArg,
    /// Names one run of the holder
    #[arg(long, env = "PAD_SESSION_ID", hide_env_values = true, value_name = "ID")]
    pub session: Option<String>,
    #[command(flatten)]
    pub ttl: TtlArgs,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub max_hold: MaxHoldArg,
    /// Claim up to N items at once, each under its own lease (1-32)
    // A negative number is a value to refuse with the range, not a flag `-1`.
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(CLAIM_NEXT_COUNT_MAX)))]
    pub count: Option<u32>,
    /// When nothing is ready, wait up to this long for work, answered the moment an item is: 10s (or 10), 30s at most
    #[arg(long, value_name = "DURATION", value_parser = parse_wait, allow_hyphen_values = true)]
    pub wait: Option<u32>,
    // Last: its help heading would cover the options after it.
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// `--wait`: whole seconds, 0 to claim-next's longest wait (docs/api.md,
/// "Batches and long polls"). Unlike `--ttl`, a bare number is read as
/// seconds: no wait is longer than 30 s, so a number meant in minutes or
/// hours is out of range and refused all the same.
fn parse_wait(s: &str) -> Result<u32, String> {
    let max = CLAIM_NEXT_WAIT_MAX_SECONDS;
    let too_long = || format!("a claim waits at most {max}s; got {s}");
    let bare = s.trim();
    let secs = if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_digit()) {
        bare.parse::<u64>().map_err(|_| too_long())?
    } else {
        ttl::seconds_or_zero(s).map_err(|_| format!("`{s}` is not a wait like 10s or 30s (0s to {max}s)"))?
    };
    u32::try_from(secs).ok().filter(|w| *w <= max).ok_or_else(too_long)
}

pub async fn claim(ctx: &Ctx, client: &Client, a: ClaimArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let body = ClaimBody {
        holder: a.holder.holder,
        session_id: a.session,
        ttl_seconds: a.ttl.seconds(),
        note: a.note,
        refresh: a.no_refresh.then_some(false),
        max_hold_seconds: a.max_hold.seconds(),
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
        epoch: a.handle.epoch,
        lease_id: a.handle.lease_id,
        holder: a.holder.holder,
        ttl_seconds: a.ttl.seconds(),
        note: a.note,
    };
    let renewed = client.renew(ctx.ws(), &r.to_string(), &body).await.map_err(named(r, body.epoch, body.lease_id))?;
    ctx.emit(&renewed, |rn| {
        let mut out = lease_line("Renewed", r, &rn.lease);
        if rn.capped {
            out += "The lease has reached its max hold (L19): it ends then, however often it is renewed\n";
        }
        out
    })
}

pub async fn release(ctx: &Ctx, client: &Client, a: ReleaseArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let next = a.next.body(a.holder.holder.as_ref())?;
    let body = ReleaseBody {
        holder: a.holder.holder,
        epoch: a.epoch,
        lease_id: a.lease_id,
        force: a.force,
        reason: a.reason,
        succeeded: false,
        next,
    };
    let released = client.release(ctx.ws(), &r.to_string(), &body).await.map_err(|e| {
        // Someone else's lease: say the two ways on (docs/leases.md, "Renew,
        // release, break").
        let hint = e.held_lease().filter(|_| !body.force).map(|held| release_hint(&held.holder));
        let err = CliError::for_lease(r, body.epoch, body.lease_id, e);
        match hint {
            Some(hint) => err.with_hint(&hint),
            None => err,
        }
    })?;
    // Nothing to release is not a failure (L6): exit 0 either way.
    ctx.emit(&released, |rel| {
        release_line(r, rel.released, &rel.reason, body.force, body.reason.as_deref()) + &next_text(&rel.next)
    })?;
    say_next_error(&released.next_error);
    Ok(())
}

/// What a release says. `--force` on your own lease is a plain release
/// (nothing to break) whose reason the `lease.released` event keeps
/// (docs/leases.md, "Renew, release, break").
fn release_line(r: &ItemRef, released: bool, how: &str, force: bool, reason: Option<&str>) -> String {
    match (released, how) {
        (true, "broken") => format!("Lease broken on {r}\n"),
        (true, _) if force => format!(
            "Lease released (it was yours, so nothing was broken; the lease.released event keeps the reason: {})\n",
            reason.unwrap_or_default()
        ),
        (true, _) => "Lease released\n".to_string(),
        (false, _) => "No live lease\n".to_string(),
    }
}

/// The ways on from a release refused because another holder has the lease.
fn release_hint(holder: &str) -> String {
    let label = if holder.contains(char::is_whitespace) { format!("'{holder}'") } else { holder.to_string() };
    format!(
        ". If it is yours under that label, pass --holder {label}; a workspace owner may break it with --force --reason \"…\""
    )
}

/// L15: `Completed TASK-1 (done); lease 7 ended`.
pub async fn complete(ctx: &Ctx, client: &Client, a: CompleteArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let next = a.next.body(a.holder.holder.as_ref())?;
    let body = CompleteBody {
        epoch: a.handle.epoch,
        lease_id: a.handle.lease_id,
        holder: a.holder.holder,
        status: a.status,
        next,
    };
    let done = client.complete(ctx.ws(), &r.to_string(), &body).await.map_err(named(r, body.epoch, body.lease_id))?;
    ctx.emit(&done, |d| {
        format!("Completed {} ({}); lease released\n", d.item_ref, d.item.status) + &next_text(&d.next)
    })?;
    say_next_error(&done.next_error);
    Ok(())
}

/// `about`, for a call that named its lease: a handle that is not the live
/// lease's is a mismatch, not a loss (`CliError::for_lease`).
fn named(r: &ItemRef, epoch: Option<i64>, lease_id: Option<i64>) -> impl FnOnce(ClientError) -> CliError + '_ {
    move |e| CliError::for_lease(r, epoch, lease_id, e)
}

/// L14: `Failed TASK-1 (failure 2); retry after … (in 1m)`.
pub async fn fail(ctx: &Ctx, client: &Client, a: FailArgs) -> Result<(), CliError> {
    let r = &a.item.item_ref;
    let next = a.next.body(a.holder.holder.as_ref())?;
    let body = FailBody {
        epoch: a.handle.epoch,
        lease_id: a.handle.lease_id,
        holder: a.holder.holder,
        note: a.note,
        max_failures: a.max_failures,
        next,
    };
    let failed = client.fail(ctx.ws(), &r.to_string(), &body).await.map_err(named(r, body.epoch, body.lease_id))?;
    ctx.emit(&failed, |f| {
        let mut out = format!("Failed {} (failure {})", f.item_ref, f.item.failures);
        if let Some(at) = f.item.retry_at {
            out.push_str(&format!("; retry after {}", output::at(at, Utc::now())));
        }
        out.push('\n');
        if f.quarantined {
            out.push_str(&format!("Quarantined {}: labelled needs-human\n", f.item_ref));
        }
        out + &next_text(&f.next)
    })?;
    say_next_error(&failed.next_error);
    Ok(())
}

/// What `--next` claimed, in `claim-next`'s words; nothing without `--next`.
fn next_text(next: &Option<ClaimNextResponse>) -> String {
    match next {
        Some(n) if n.grants.is_empty() => "No ready item\n".to_string(),
        Some(n) => grants_text(n),
        None => String::new(),
    }
}

/// `--next` whose claim failed once the end was recorded: said on stderr;
/// the end stands, so the command still exits 0 (docs/api.md, "The next
/// item in the same call").
fn say_next_error(error: &Option<ErrorBody>) {
    if let Some(e) = error {
        eprintln!(
            "The next item was not claimed ({}): {}; claim it with `pad item claim-next`",
            e.code.as_str(),
            e.message
        );
    }
}

pub async fn claim_next(ctx: &Ctx, client: &Client, a: ClaimNextArgs) -> Result<(), CliError> {
    let body = ClaimNextBody {
        filter: filter(a.filter),
        holder: a.holder.holder,
        session_id: a.session,
        ttl_seconds: a.ttl.seconds(),
        note: a.note,
        max_hold_seconds: a.max_hold.seconds(),
        count: a.count.map(i64::from),
        wait_seconds: a.wait.map(i64::from),
        wait: None,
    };
    let next = client.claim_next(ctx.ws(), &body).await?;
    // JSON readers get the answer either way (`item: null` when nothing is
    // ready); the exit code tells scripts apart without parsing it.
    ctx.emit(&next, grants_text)?;
    if next.item.is_none() {
        eprintln!("No ready item");
        return Err(CliError::Exit(Exit::NotFound.code()));
    }
    Ok(())
}

/// One `Claimed …` line per grant, each with its handoff note if any.
fn grants_text(n: &ClaimNextResponse) -> String {
    let mut out = String::new();
    for g in &n.grants {
        out.push_str(&lease_line("Claimed", &g.item.item_ref, &g.lease));
        if let Some(line) = handoff_line(g.previous_holder.as_deref(), g.previous_note.as_deref()) {
            out.push_str(&line);
        }
    }
    out
}

/// `Handoff from runner-a: migrated 3 of 7 tables` (L12), if there is a note.
pub fn handoff_line(holder: Option<&str>, note: Option<&str>) -> Option<String> {
    let by = holder.map(|h| format!(" from {h}")).unwrap_or_default();
    note.map(|note| format!("Handoff{by}: {note}\n"))
}

/// The wire filter of `--kind`, `--label`, … (L11).
pub fn filter(f: FilterArgs) -> FrontierFilter {
    FrontierFilter {
        kinds: f.kinds,
        labels: f.labels,
        without_labels: f.without_labels,
        min_priority: f.min_priority,
        parent: f.parent.map(|r| r.to_string()),
        autonomous: f.autonomous,
        exclude: f.exclude.iter().map(ToString::to_string).collect(),
        skip_session: None,
    }
}

/// The same filter as `GET …/frontier` takes it: lists comma-separated.
pub fn frontier_query(f: &FrontierFilter) -> FrontierQuery {
    let joined = |values: &[String]| (!values.is_empty()).then(|| values.join(","));
    FrontierQuery {
        kind: joined(&f.kinds),
        label: joined(&f.labels),
        without_label: joined(&f.without_labels),
        min_priority: f.min_priority,
        parent: f.parent.clone(),
        autonomous: f.autonomous.then_some(true),
        exclude: joined(&f.exclude),
        skip_session: f.skip_session.clone(),
        limit: None,
    }
}

/// `Claimed TASK-1: runner-a, epoch 1, lease 42, expires 2026-…Z (in 15m)`:
/// both handles `complete`, `fail`, `renew` and `release` take (docs/leases.md L17).
pub fn lease_line(verb: &str, r: &ItemRef, l: &Lease) -> String {
    let session = l.session_id.as_deref().map(|s| format!(", session {s}")).unwrap_or_default();
    format!(
        "{verb} {r}: {}{session}, epoch {}, lease {}, expires {}\n",
        l.holder,
        l.epoch,
        l.lease_id,
        output::at(l.expires_at, Utc::now())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontier_query_joins_lists_and_omits_defaults() {
        let args = FrontierArgs {
            filter: FilterArgs {
                kinds: vec!["bug".into(), "task".into()],
                without_labels: vec!["needs-human".into()],
                parent: Some("feat-2".parse().unwrap()),
                ..FilterArgs::default()
            },
            limit: None,
        };
        let q = FrontierQuery { limit: args.limit, ..frontier_query(&filter(args.filter)) };
        assert_eq!(q.kind.as_deref(), Some("bug,task"));
        assert_eq!((q.label, q.without_label.as_deref()), (None, Some("needs-human")));
        assert_eq!((q.parent.as_deref(), q.autonomous, q.limit), (Some("FEAT-2"), None, None));
    }

    #[test]
    fn handoff_names_the_previous_holder() {
        assert_eq!(
            handoff_line(Some("runner-a"), Some("migrated 3 of 7 tables")).as_deref(),
            Some("Handoff from runner-a: migrated 3 of 7 tables\n")
        );
        assert_eq!(handoff_line(None, Some("half way")).as_deref(), Some("Handoff: half way\n"));
        assert_eq!(handoff_line(Some("runner-a"), None), None);
    }

    #[test]
    fn a_bare_wait_is_seconds_within_the_bound() {
        for (given, secs) in [("5", 5), ("0", 0), ("30", 30), ("10s", 10), ("0s", 0)] {
            assert_eq!(parse_wait(given), Ok(secs), "{given}");
        }
        for given in ["31", "1m", "-1", "99999999999999999999", "soon", ""] {
            assert!(parse_wait(given).is_err(), "{given}");
        }
        assert_eq!(parse_wait("31"), Err("a claim waits at most 30s; got 31".to_string()));
    }
}
