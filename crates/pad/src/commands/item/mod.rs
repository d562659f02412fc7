//! `pad item create|list|show|update|close|delete|restore|history|comment`; the
//! lease subcommands live in [`super::lease`].

use std::path::Path;

use chrono::{DateTime, Utc};
use pad_core::api::{DeleteQuery, FrontierQuery, ListQuery, NewComment, PageQuery};
use pad_core::{Comment, Item, ItemPatch, NewItem, Status, Version};

mod args;

pub use args::*;

use super::{Ctx, about, lease};
use crate::error::CliError;
use crate::output::{self, colour_enabled, cyan, fit, table, terminal_width, timestamp};

pub async fn run(ctx: &Ctx, cmd: ItemCommand) -> Result<(), CliError> {
    let client = ctx.client()?;
    let ws = ctx.ws();
    match cmd {
        ItemCommand::Create(args) => {
            let created = client.create_item(ws, &new_item(args)?).await;
            let item = match created {
                Err(e) => return Err(name_the_kinds(&client, ws, e).await),
                Ok(item) => item,
            };
            ctx.emit(&item, |i| format!("{}\n", i.item_ref))
        }
        ItemCommand::List(args) => {
            let again = list_again(ws, &args);
            let page = client.list_items(ws, &list_query(args)).await?;
            if page.items.is_empty() {
                eprintln!("No items");
            }
            ctx.emit(&page, |p| {
                fit(&render_list(&p.items, colour_enabled(), Utc::now(), terminal_width()), terminal_width())
            })?;
            if let Some(cursor) = &page.next_cursor {
                eprintln!("More items: {again} --cursor {cursor}");
            }
            Ok(())
        }
        ItemCommand::Show(a) => {
            let item = client.item(ws, &a.item_ref.to_string()).await.map_err(about(&a.item_ref))?;
            ctx.emit(&item, |i| render_show(i, Utc::now()))
        }
        ItemCommand::Update(args) => {
            let r = args.item.item_ref.clone();
            let mut patch = patch(args)?;
            patch.expected_updated_at = exact_updated_at(&client, ws, &r, patch.expected_updated_at).await?;
            let updated = client.update_item(ws, &r.to_string(), &patch).await;
            let item = match updated {
                Err(e) if is_kind_error(&e) => return Err(name_the_kinds(&client, ws, e).await),
                other => other.map_err(about(&r))?,
            };
            ctx.emit(&item, |i| format!("Updated {}\n", i.item_ref))
        }
        ItemCommand::Close(args) => {
            let r = args.item.item_ref.clone();
            let status = args.reason.status();
            let patch = ItemPatch {
                status: Some(status),
                expected_updated_at: exact_updated_at(&client, ws, &r, args.expected_updated_at).await?,
                lease_epoch: args.lease_epoch,
                lease_id: args.lease_id,
                ..ItemPatch::default()
            };
            let item = client.update_item(ws, &r.to_string(), &patch).await.map_err(about(&r))?;
            // After the close, so a close its guards refuse leaves no comment.
            if let Some(body) = args.comment.clone() {
                client.add_comment(ws, &r.to_string(), &NewComment { body }).await.map_err(about(&r))?;
            }
            ctx.emit(&item, |i| format!("Closed {} ({})\n", i.item_ref, i.status))
        }
        ItemCommand::Delete(args) => {
            let r = &args.item.item_ref;
            let query = DeleteQuery { lease_epoch: args.lease_epoch, lease_id: args.lease_id };
            let item = client.delete_item(ws, &r.to_string(), &query).await.map_err(about(r))?;
            ctx.emit(&item, |i| format!("Deleted {0} (undo with `pad item restore {0}`)\n", i.item_ref))
        }
        ItemCommand::Restore(a) => {
            let item = client.restore_item(ws, &a.item_ref.to_string()).await.map_err(about(&a.item_ref))?;
            ctx.emit(&item, |i| format!("Restored {}\n", i.item_ref))
        }
        ItemCommand::History(a) => {
            let history = client.history(ws, &a.item_ref.to_string()).await.map_err(about(&a.item_ref))?;
            ctx.emit(&history, |h| render_history(&h.versions))
        }
        ItemCommand::Comment(CommentArgs { item, text, .. }) => {
            let r = &item.item_ref;
            // clap allows exactly one of TEXT and --list.
            if let Some(body) = text {
                let comment = client.add_comment(ws, &r.to_string(), &NewComment { body }).await.map_err(about(r))?;
                // The id is the workspace's, not a count on this item.
                ctx.emit(&comment, |c| format!("Comment added to {r} (id {})\n", c.id))
            } else {
                let list = client.comments(ws, &r.to_string()).await.map_err(about(r))?;
                if list.comments.is_empty() {
                    eprintln!("No comments on {r}");
                }
                ctx.emit(&list, |l| render_comments(&l.comments))
            }
        }
        ItemCommand::Claim(args) => lease::claim(ctx, &client, args).await,
        ItemCommand::Renew(args) => lease::renew(ctx, &client, args).await,
        ItemCommand::Release(args) => lease::release(ctx, &client, args).await,
        ItemCommand::Complete(args) => lease::complete(ctx, &client, args).await,
        ItemCommand::Fail(args) => lease::fail(ctx, &client, args).await,
        ItemCommand::ClaimNext(args) => lease::claim_next(ctx, &client, args).await,
        ItemCommand::Frontier(args) => {
            let query = FrontierQuery { limit: args.limit, ..lease::frontier_query(&lease::filter(args.filter)) };
            let page = client.frontier(ws, &query).await?;
            if page.items.is_empty() {
                eprintln!("No ready item");
            }
            ctx.emit(&page, |p| {
                fit(&render_list(&p.items, colour_enabled(), Utc::now(), terminal_width()), terminal_width())
            })
        }
    }
}

/// `--expected-updated-at` as `pad item show` prints it: whole seconds
/// (README.md, "Times"), while the server compares the exact time
/// (docs/api.md). A time without a fraction of a second stands for the
/// item's one change within that second, sent exactly; a time with a
/// fraction (`--format json`'s `updated_at`) is sent as given. Two changes
/// within the second cannot be told apart by it, so that is a conflict.
async fn exact_updated_at(
    client: &pad_client::Client, ws: &str, r: &pad_core::ItemRef, given: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, CliError> {
    let Some(given) = given.filter(|t| t.timestamp_subsec_nanos() == 0) else { return Ok(given) };
    let item = client.item(ws, &r.to_string()).await.map_err(about(r))?;
    if item.updated_at.timestamp() != given.timestamp() {
        // Another second: the server refuses it, naming the time it has.
        return Ok(Some(given));
    }
    let newest = PageQuery { limit: Some(2), cursor: None };
    let history = client.history_page(ws, &r.to_string(), &newest).await.map_err(about(r))?;
    if history.versions.iter().filter(|v| v.at.timestamp() == given.timestamp()).count() > 1 {
        return Err(CliError::new(
            crate::error::Exit::Conflict,
            format!(
                "{r} changed more than once within {}; `pad item show {r}` shows it now, then retry \
                 (or pass the exact `updated_at` of `pad item show {r} --format json`)",
                timestamp(given)
            ),
        ));
    }
    Ok(Some(item.updated_at))
}

fn is_kind_error(e: &pad_client::ClientError) -> bool {
    matches!(e, pad_client::ClientError::Api { code: pad_core::api::ErrorCode::ValidationFailed, details, .. }
        if details.get("field").and_then(|f| f.as_str()) == Some("kind"))
}

/// An unknown `--kind`: the refusal, with the workspace's kinds listed so the
/// next try can be right.
async fn name_the_kinds(client: &pad_client::Client, ws: &str, e: pad_client::ClientError) -> CliError {
    if !is_kind_error(&e) {
        return e.into();
    }
    let kinds = client.kinds(ws).await.map(|k| k.kinds.into_iter().map(|k| k.name).collect::<Vec<_>>());
    match (CliError::from(e), kinds) {
        (e @ CliError::Failed { .. }, Ok(names)) if !names.is_empty() => {
            e.with_hint(&format!("; the kinds are: {}", names.join(", ")))
        }
        (refused, _) => refused,
    }
}

fn new_item(a: CreateArgs) -> Result<NewItem, CliError> {
    Ok(NewItem {
        title: a.title,
        body: read_body(&a.body)?.unwrap_or_default(),
        kind: a.kind,
        priority: a.priority,
        labels: a.labels,
        parent: a.parent.map(|r| r.to_string()),
        blocked_by: a.blocked_by.iter().map(ToString::to_string).collect(),
        assignee: a.assignee,
        not_before: a.not_before,
    })
}

/// `--body TEXT`, or `--body-file FILE` (`-` reads stdin).
fn read_body(b: &BodyArgs) -> Result<Option<String>, CliError> {
    let Some(path) = &b.body_file else { return Ok(b.body.clone()) };
    let read =
        if path == Path::new("-") { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(path) };
    read.map(Some).map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))
}

/// The same listing as a command line, for the next-page hint: it keeps
/// the workspace, the filters and the limit, so the next page is of the
/// same list.
fn list_again(ws: &str, a: &ListArgs) -> String {
    fn quoted(s: &str) -> String {
        if s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.,@:/".contains(c)) {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    }
    let mut out = format!("pad item list -w {}", quoted(ws));
    let mut flag = |name: &str, values: Vec<String>| {
        if !values.is_empty() {
            out.push_str(&format!(" --{name} {}", quoted(&values.join(","))));
        }
    };
    flag("status", a.status.iter().map(ToString::to_string).collect());
    flag("kind", a.kind.clone());
    flag("label", a.labels.clone());
    flag("priority", a.priority.iter().map(ToString::to_string).collect());
    flag("assignee", a.assignee.iter().cloned().collect());
    flag("search", a.search.iter().cloned().collect());
    flag("limit", a.limit.iter().map(ToString::to_string).collect());
    if a.leased {
        out.push_str(" --leased");
    }
    out
}

/// `--status`: none asked lists what is not finished (open, in-progress);
/// `all` asks for every status (README, "Tables for people and scripts").
fn status_query(asked: &[StatusFilter]) -> Option<String> {
    if asked.is_empty() {
        return Some(format!("{},{}", Status::Open, Status::InProgress));
    }
    if asked.contains(&StatusFilter::All) {
        return None;
    }
    Some(asked.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
}

fn list_query(a: ListArgs) -> ListQuery {
    let joined = |values: Vec<String>| (!values.is_empty()).then(|| values.join(","));
    ListQuery {
        status: status_query(&a.status),
        kind: joined(a.kind),
        label: joined(a.labels),
        priority: joined(a.priority.iter().map(ToString::to_string).collect()),
        assignee: a.assignee,
        leased: a.leased.then_some(true),
        q: a.search,
        parent: a.parent.map(|r| r.to_string()),
        limit: a.limit,
        cursor: a.cursor,
    }
}

fn patch(a: UpdateArgs) -> Result<ItemPatch, CliError> {
    let patch = ItemPatch {
        title: a.title,
        body: read_body(&a.body)?,
        kind: a.kind,
        status: a.status,
        priority: a.priority,
        labels: None,
        add_labels: a.add_labels,
        remove_labels: a.remove_labels,
        parent: if a.clear_parent { Some(None) } else { a.parent.map(|r| Some(r.to_string())) },
        blocked_by: (!a.blocked_by.is_empty()).then(|| a.blocked_by.iter().map(ToString::to_string).collect()),
        add_blocked_by: a.add_blocked_by.iter().map(ToString::to_string).collect(),
        remove_blocked_by: a.remove_blocked_by.iter().map(ToString::to_string).collect(),
        assignee: if a.unassign { Some(None) } else { a.assignee.map(Some) },
        not_before: if a.clear_not_before { Some(None) } else { a.not_before.map(Some) },
        expected_updated_at: a.expected_updated_at,
        lease_epoch: a.lease_epoch,
        lease_id: a.lease_id,
    };
    // The guards alone change nothing; say so instead of writing a no-op.
    let guards_only = ItemPatch { expected_updated_at: None, lease_epoch: None, lease_id: None, ..patch.clone() };
    if guards_only == ItemPatch::default() {
        return Err(CliError::usage("nothing to update: give at least one field, like --status done"));
    }
    Ok(patch)
}

/// `»` marks rows with a live lease, in the gutter before the ref, so the
/// columns stay put; leased rows name their holder and expiry (README.md,
/// "Tables for people and scripts"). On a terminal the lease columns appear when a row is leased;
/// into a pipe they are always there, so fields keep their places.
/// `width`: the terminal's, when known: a long holder label is cut to a
/// sixth of it, so the title, cut last, keeps room on a narrow terminal.
fn render_list(items: &[Item], colour: bool, now: DateTime<Utc>, width: Option<usize>) -> String {
    if items.is_empty() {
        return String::new();
    }
    let holder_room = width.map(|w| (w / 6).max(8));
    let holder = |h: &str| match holder_room {
        Some(room) if h.chars().count() > room => {
            h.chars().take(room - 1).chain(std::iter::once('…')).collect::<String>()
        }
        _ => h.to_string(),
    };
    let lease_columns = output::plain() || items.iter().any(|i| i.lease.is_some());
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            // Into a pipe the holder field says it; a marker would only
            // have to be cut off the ref.
            let marker = if i.lease.is_some() && !output::plain() { cyan("»", colour) } else { " ".to_string() };
            let mut row = vec![
                format!("{marker} {}", i.item_ref),
                paint(status_colour(i.status), i.status.as_str(), colour),
                paint(priority_colour(i.priority), i.priority.as_str(), colour),
            ];
            if lease_columns {
                row.push(i.lease.as_ref().map(|l| holder(&l.holder)).unwrap_or_default());
                row.push(i.lease.as_ref().map(|l| output::when(l.expires_at, now)).unwrap_or_default());
            }
            row.push(i.title.clone());
            row
        })
        .collect();
    if lease_columns {
        table(&["  REF", "STATUS", "PRIORITY", "HOLDER", "EXPIRES", "TITLE"], &rows)
    } else {
        table(&["  REF", "STATUS", "PRIORITY", "TITLE"], &rows)
    }
}

/// ANSI colour codes, as `gh` uses them: what needs attention stands out.
fn status_colour(s: pad_core::Status) -> &'static str {
    match s {
        pad_core::Status::Open => "32",
        pad_core::Status::InProgress => "33",
        _ => "2",
    }
}

fn priority_colour(p: pad_core::Priority) -> &'static str {
    match p {
        pad_core::Priority::Critical => "1;31",
        pad_core::Priority::High => "31",
        pad_core::Priority::Medium => "0",
        _ => "2",
    }
}

fn paint(code: &str, text: &str, colour: bool) -> String {
    if colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
}

fn render_show(i: &Item, now: DateTime<Utc>) -> String {
    let mut out = format!("{}  {}\n", i.item_ref, i.title);
    field_line(&mut out, "Status", i.status.as_str());
    field_line(&mut out, "Priority", i.priority.as_str());
    field_line(&mut out, "Kind", &i.kind);
    if !i.labels.is_empty() {
        field_line(&mut out, "Labels", &i.labels.join(", "));
    }
    field_line(&mut out, "Created", &format!("{} by {}", output::at(i.created_at, now), i.created_by));
    field_line(&mut out, "Updated", &output::at(i.updated_at, now));
    if let Some(at) = i.deleted_at {
        field_line(&mut out, "Deleted", &output::at(at, now));
    }
    field_line(&mut out, "Assigned", i.assignee.as_deref().unwrap_or("-"));
    if let Some(l) = &i.lease {
        field_line(&mut out, "Lease", &format!("{}, expires {}", l.holder, output::at(l.expires_at, now)));
        // L19: the cap, which no renewal moves.
        if let Some(cap) = l.hold_until {
            let capped = if l.is_capped() { "; capped: renewals no longer extend it" } else { "" };
            field_line(&mut out, "Held max", &format!("until {}{capped}", output::at(cap, now)));
        }
        if let Some(note) = &i.lease_note {
            field_line(&mut out, "Progress", note);
        }
    }
    if let Some(l) = &i.last_lease {
        field_line(
            &mut out,
            "Last",
            &format!(
                "{} {} at {}, epoch {}, lease {}",
                l.holder,
                l.ended,
                output::at(l.ended_at, now),
                l.epoch,
                l.lease_id
            ),
        );
        if let Some(note) = &l.note {
            field_line(&mut out, "Note", note);
        }
        if let Some(by) = &l.broken_by {
            let reason = l.reason.as_deref().unwrap_or("no reason given");
            field_line(&mut out, "Broken", &format!("by {by}: {reason}"));
        }
    }
    // What happened last (docs/leases.md, "News that is true"): a success
    // after failures is the news, the failures its history.
    let succeeded_last = i.succeeded_last();
    if let Some(at) = i.last_success_at.filter(|_| succeeded_last) {
        field_line(&mut out, "Outcome", &format!("succeeded {}", output::at(at, now)));
    }
    if i.failures > 0 {
        let note = i.last_failure_note.as_deref().map(|n| format!(", last: {n}")).unwrap_or_default();
        if succeeded_last {
            field_line(&mut out, "Failures", &format!("{} before that{note}", i.failures));
        } else {
            field_line(&mut out, "Failures", &i.failures.to_string());
            if let Some(note) = &i.last_failure_note {
                field_line(&mut out, "Failed", note);
            }
        }
    }
    for (name, at) in [("Retry at", i.retry_at), ("Deferred", i.not_before)] {
        if let Some(at) = at.filter(|at| *at > now) {
            field_line(&mut out, name, &output::at(at, now));
        }
    }
    if !i.body.trim().is_empty() {
        out.push('\n');
        out.push_str(i.body.trim_end());
        out.push_str("\n\n");
    }
    if let Some(p) = &i.parent {
        field_line(&mut out, "Parent", &p.to_string());
    }
    if !i.blocked_by.is_empty() {
        field_line(&mut out, "Blockers", &i.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "));
    }
    let comments = match i.comments_count {
        0 => "0".to_string(),
        n => format!("{n} (`pad item comment {} --list` shows them)", i.item_ref),
    };
    field_line(&mut out, "Comments", &comments);
    out
}

/// `Name:` padded so values line up: `Lease:    runner-a, expires 2026-01-01T00:15:00Z (in 14m)`.
fn field_line(out: &mut String, name: &str, value: &str) {
    let label = format!("{name}:");
    out.push_str(&format!("{label:<10}{value}\n"));
}

fn render_history(versions: &[Version]) -> String {
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            let fields = v.changes.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>().join(", "));
            vec![v.version.to_string(), output::when(v.at, Utc::now()), v.actor.clone(), fields.unwrap_or_default()]
        })
        .collect();
    table(&["VERSION", "AT", "BY", "CHANGED"], &rows)
}

fn render_comments(comments: &[Comment]) -> String {
    comments
        .iter()
        .map(|c| {
            let body: String = c.body.trim_end().lines().map(|l| format!("    {l}\n")).collect();
            format!("#{} {} at {}\n{body}\n", c.id, c.author, timestamp(c.created_at))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use pad_core::{Lease, Priority, Status};

    fn item(leased: bool) -> Item {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        Item {
            item_ref: "TASK-1".parse().unwrap(),
            kind: "task".into(),
            title: "Fix it".into(),
            body: "Some *body*.".into(),
            status: Status::Open,
            priority: Priority::High,
            labels: vec![],
            parent: None,
            blocked_by: vec!["BUG-2".parse().unwrap()],
            assignee: Some("a@example.com".into()),
            created_by: "o@example.com".into(),
            created_at: t,
            updated_at: t,
            deleted_at: None,
            comments_count: 2,
            blocked_by_open: vec![],
            not_before: None,
            failures: 0,
            retry_at: None,
            last_failure_note: None,
            last_failure_at: None,
            last_success_at: None,
            last_lease: None,
            lease_note: leased.then(|| "3 of 7 done".into()),
            lease: leased.then(|| Lease {
                lease_id: 1,
                holder: "runner-a".into(),
                session_id: None,
                epoch: 1,
                acquired_at: t,
                renewed_at: t,
                expires_at: t + chrono::Duration::seconds(15 * 60),
                ttl_seconds: 900,
                hold_until: None,
                user_id: 0,
            }),
        }
    }

    #[test]
    fn show_puts_the_lease_under_assigned_only_when_live() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
        let text = render_show(&item(true), now);
        assert!(
            text.contains(
                "Assigned: a@example.com\nLease:    runner-a, expires 2026-01-01T00:15:00Z (in 14m)\nProgress: 3 of 7 done\n"
            ),
            "{text}"
        );
        assert!(text.contains("Blockers: BUG-2\nComments: 2 (`pad item comment "), "{text}");
        assert!(!render_show(&item(false), now).contains("Lease:"));
    }

    #[test]
    fn list_names_the_holder_of_leased_rows_and_leaves_the_columns_out_otherwise() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
        let text = render_list(&[item(true), item(false)], false, now, None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "  REF     STATUS  PRIORITY  HOLDER    EXPIRES  TITLE",
                "» TASK-1  open    high      runner-a  in 14m   Fix it",
                "  TASK-1  open    high                         Fix it"
            ]
        );
        let free: Vec<String> = render_list(&[item(false)], false, now, None).lines().map(str::to_string).collect();
        assert_eq!(free, ["  REF     STATUS  PRIORITY  TITLE", "  TASK-1  open    high      Fix it"]);
        assert!(render_list(&[item(true)], true, now, None).contains("\x1b[36m»\x1b[0m TASK-1"));
    }

    #[test]
    fn at_sixty_columns_a_long_holder_is_cut_and_the_title_keeps_room() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
        let mut leased = item(true);
        if let Some(l) = leased.lease.as_mut() {
            l.holder = "claude-code@build-host-7f3a9c2e1b".into();
        }
        leased.title = "Migrate the billing tables".into();
        let text = fit(&render_list(&[leased], false, now, Some(60)), Some(60));
        let row = text.lines().nth(1).unwrap();
        assert!(row.contains("claude-co…") && row.contains("Migrate th"), "{text}");
    }

    #[test]
    fn list_hides_finished_items_unless_asked() {
        assert_eq!(status_query(&[]).as_deref(), Some("open,in-progress"));
        assert_eq!(status_query(&[StatusFilter::All]), None);
        assert_eq!(status_query(&[StatusFilter::Is(Status::Done)]).as_deref(), Some("done"));
    }

    #[test]
    fn list_query_joins_multi_values() {
        let args = ListArgs {
            status: vec![StatusFilter::Is(Status::Open), StatusFilter::Is(Status::InProgress)],
            kind: vec![],
            labels: vec!["a".into(), "b".into()],
            priority: vec![],
            assignee: None,
            leased: true,
            search: None,
            parent: None,
            limit: Some(5),
            cursor: None,
        };
        let q = list_query(args);
        assert_eq!(
            (q.status.as_deref(), q.label.as_deref(), q.kind, q.leased),
            (Some("open,in-progress"), Some("a,b"), None, Some(true))
        );
    }
}
