//! `pad export` and `pad import` (docs/operations.md, "Export and import"):
//! one workspace as JSON Lines, over the HTTP API, so they work against any
//! server and any backend.
//!
//! Import is all or nothing for live items: everything is read and checked
//! before the first write, and if a write fails, every item already created
//! is deleted again before the command fails. Refs are kept when free:
//! items are created in number order, so in a workspace whose counter for a
//! kind has not passed the file's first number, each gets its old ref back.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, Write};

use pad_client::{Client, ClientError};
use pad_core::api::{CreateKind, ListQuery, NewComment};
use pad_core::{Comment, Item, ItemPatch, NewItem, Priority, Status, Version};
use serde::{Deserialize, Serialize};

use super::Ctx;
use crate::cli::{ExportArgs, ImportArgs};
use crate::error::CliError;
use crate::output;

/// One line of an export: the item as the API shows it, its comments
/// (oldest first) and its history (as the API lists it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportedItem {
    #[serde(flatten)]
    pub item: Item,
    #[serde(default)]
    pub comments: Vec<Comment>,
    #[serde(default)]
    pub history: Vec<Version>,
}

pub async fn export(ctx: &Ctx, args: ExportArgs) -> Result<(), CliError> {
    let client = ctx.client()?;
    let ws = ctx.ws();
    let mut items: BTreeMap<(String, i64), Item> = BTreeMap::new();
    let mut cursor = None;
    loop {
        let query = ListQuery { limit: Some(500), cursor: cursor.take(), ..Default::default() };
        let page = client.list_items(ws, &query).await?;
        for item in page.items {
            items.insert((item.item_ref.prefix.clone(), item.item_ref.number), item);
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    // Lists leave deleted items out; numbers are never reused, so the gaps
    // below each kind's highest live number are the deleted items.
    let mut highest: HashMap<String, i64> = HashMap::new();
    for (prefix, number) in items.keys() {
        let h = highest.entry(prefix.clone()).or_default();
        *h = (*h).max(*number);
    }
    for (prefix, high) in highest {
        for number in 1..high {
            if items.contains_key(&(prefix.clone(), number)) {
                continue;
            }
            match client.item(ws, &format!("{prefix}-{number}")).await {
                Ok(item) => {
                    items.insert((prefix.clone(), number), item);
                }
                Err(ClientError::Api { code: pad_core::api::ErrorCode::NotFound, .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| CliError::config(format!("{}: {e}", path.display())))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let count = items.len();
    for mut item in items.into_values() {
        // A lease belongs to a running worker and its server: not exported.
        item.lease = None;
        let r = item.item_ref.to_string();
        let comments = client.comments(ws, &r).await?.comments;
        let history = client.history(ws, &r).await?.versions;
        let line = serde_json::to_string(&ExportedItem { item, comments, history })
            .map_err(|e| CliError::internal(e.to_string()))?;
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    drop(out);
    eprintln!("exported {count} items of workspace `{ws}`");
    Ok(())
}

/// An item to create, checked, with its links still in the file's refs.
#[derive(Debug, Clone)]
struct Planned {
    /// The ref in the file (`TASK-5`, or `#12` for a GitHub issue).
    old: String,
    number: i64,
    prefix: String,
    new: NewItem,
    status: Status,
    parent: Option<String>,
    blocked_by: Vec<String>,
    comments: Vec<String>,
    deleted: bool,
}

/// `gh issue list --json number,title,body,state,labels,comments`.
#[derive(Debug, Deserialize)]
struct GhIssue {
    number: i64,
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    labels: Vec<GhLabel>,
    #[serde(default)]
    comments: Vec<GhComment>,
}

#[derive(Debug, Deserialize)]
struct GhLabel {
    name: String,
}

#[derive(Debug, Deserialize)]
struct GhComment {
    #[serde(default)]
    author: Option<GhAuthor>,
    #[serde(default, rename = "createdAt")]
    created_at: Option<String>,
    body: String,
}

#[derive(Debug, Deserialize)]
struct GhAuthor {
    login: String,
}

/// Comments are added by the importer; the first line keeps who wrote them
/// and when.
fn attributed(author: &str, at: &str, body: &str) -> String {
    format!("_{author}, {at}:_\n\n{body}")
}

fn from_export(text: &str) -> Result<Vec<Planned>, CliError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let e: ExportedItem = serde_json::from_str(line)
            .map_err(|err| CliError::usage(format!("line {}: not an item of `pad export`: {err}", i + 1)))?;
        let item = e.item;
        out.push(Planned {
            old: item.item_ref.to_string(),
            number: item.item_ref.number,
            prefix: item.item_ref.prefix.clone(),
            new: NewItem {
                title: item.title,
                body: item.body,
                kind: Some(item.kind),
                priority: Some(item.priority),
                labels: item.labels,
                parent: None,
                blocked_by: vec![],
                assignee: item.assignee,
                // docs/leases.md L16: a deferral carries over.
                not_before: item.not_before,
            },
            status: item.status,
            parent: item.parent.map(|p| p.to_string()),
            blocked_by: item.blocked_by.iter().map(ToString::to_string).collect(),
            comments: e
                .comments
                .iter()
                .map(|c| attributed(&c.author, &output::timestamp(c.created_at), &c.body))
                .collect(),
            deleted: item.deleted_at.is_some(),
        });
    }
    Ok(out)
}

fn from_github(text: &str) -> Result<Vec<Planned>, CliError> {
    let issues: Vec<GhIssue> = serde_json::from_str(text).map_err(|e| {
        CliError::usage(format!(
            "not a GitHub issue list (gh issue list --json number,title,body,state,labels,comments): {e}"
        ))
    })?;
    Ok(issues
        .into_iter()
        .map(|i| Planned {
            old: format!("#{}", i.number),
            number: i.number,
            prefix: "TASK".into(),
            new: NewItem {
                title: i.title,
                body: i.body.unwrap_or_default(),
                kind: Some("task".into()),
                priority: Some(Priority::default()),
                labels: i.labels.into_iter().map(|l| l.name).collect(),
                ..Default::default()
            },
            status: if i.state.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("closed")) {
                Status::Done
            } else {
                Status::Open
            },
            parent: None,
            blocked_by: vec![],
            comments: i
                .comments
                .into_iter()
                .map(|c| {
                    let who = c.author.map_or_else(|| "someone".to_string(), |a| a.login);
                    attributed(&who, c.created_at.as_deref().unwrap_or("?"), &c.body)
                })
                .collect(),
            deleted: false,
        })
        .collect())
}

/// Every check that can be made before writing: fields, links, kinds.
/// Answers the kinds to create.
async fn check(client: &Client, ws: &str, plan: &mut [Planned]) -> Result<Vec<CreateKind>, CliError> {
    let mut seen = HashSet::new();
    for p in plan.iter() {
        if !seen.insert(p.old.clone()) {
            return Err(CliError::usage(format!("{} appears twice in the file", p.old)));
        }
    }
    for p in plan.iter() {
        p.new.validate().map_err(|e| CliError::usage(format!("{}: {}: {}", p.old, e.field, e.message)))?;
        for link in p.parent.iter().chain(&p.blocked_by) {
            if !seen.contains(link) {
                return Err(CliError::usage(format!(
                    "{} links to {link}, which is not in the file: export the whole workspace",
                    p.old
                )));
            }
        }
        for c in &p.comments {
            pad_core::validate_comment(c)
                .map_err(|e| CliError::usage(format!("{}: a comment: {}", p.old, e.message)))?;
        }
    }
    let existing = client.kinds(ws).await?.kinds;
    let mut create: Vec<CreateKind> = Vec::new();
    for p in plan.iter() {
        let kind = p.new.kind.clone().unwrap_or_else(|| "task".into()).to_ascii_lowercase();
        if existing.iter().any(|k| k.name == kind) || create.iter().any(|k| k.name == kind) {
            continue;
        }
        if let Some(other) = existing.iter().find(|k| k.prefix.eq_ignore_ascii_case(&p.prefix)) {
            return Err(CliError::usage(format!(
                "kind `{kind}` (prefix {}) is missing here, and its prefix belongs to kind `{}`: \
                 rename one of them first",
                p.prefix, other.name
            )));
        }
        create.push(CreateKind { name: kind, prefix: p.prefix.clone() });
    }
    // An assignee must be a member here; one who is not is left out, and said.
    let members: HashSet<String> = client.members(ws).await?.members.into_iter().map(|m| m.email).collect();
    for p in plan.iter_mut() {
        if let Some(a) = p.new.assignee.take_if(|a| !members.contains(a.as_str())) {
            eprintln!("{}: assignee {a} is not a member of `{ws}`; imported unassigned", p.old);
        }
    }
    Ok(create)
}

/// `pad import --dry-run`'s answer, in words.
fn dry_run_line(items: usize, ws: &str, new_kinds: &[&str]) -> String {
    let noun = if items == 1 { "item" } else { "items" };
    let kinds =
        if new_kinds.is_empty() { "no new kinds".to_string() } else { format!("new kinds: {}", new_kinds.join(", ")) };
    format!("would import {items} {noun} into `{ws}` ({kinds}); nothing written\n")
}

pub async fn import(ctx: &Ctx, args: ImportArgs) -> Result<(), CliError> {
    let text = if args.file.as_os_str() == "-" {
        std::io::stdin().lock().lines().collect::<Result<Vec<_>, _>>()?.join("\n")
    } else {
        std::fs::read_to_string(&args.file).map_err(|e| CliError::usage(format!("{}: {e}", args.file.display())))?
    };
    let mut plan = if text.trim_start().starts_with('[') { from_github(&text)? } else { from_export(&text)? };
    // Number order per kind: where the numbers are free, the server hands
    // each item its old number back.
    plan.sort_by(|a, b| (&a.prefix, a.number).cmp(&(&b.prefix, b.number)));
    let client = ctx.client()?;
    let ws = ctx.ws();
    let kinds = check(&client, ws, &mut plan).await?;
    if args.dry_run {
        let new_kinds: Vec<&str> = kinds.iter().map(|k| k.name.as_str()).collect();
        return output::print(&dry_run_line(plan.len(), ws, &new_kinds));
    }
    for k in &kinds {
        client.create_kind(ws, k).await?;
    }
    let mut created: Vec<String> = Vec::new();
    match write(&client, ws, &plan, &mut created).await {
        Ok(mapping) => report(ctx, ws, &plan, &mapping),
        Err((what, e)) => {
            let mut undone = 0;
            for r in &created {
                if client.delete_item(ws, r, &Default::default()).await.is_ok() {
                    undone += 1;
                }
            }
            let err = CliError::from(e);
            Err(CliError::new(
                match &err {
                    CliError::Failed { code, .. } => *code,
                    _ => 1,
                },
                format!(
                    "import failed at {what}: {err}; rolled back: deleted the {undone} of {} items it had \
                     created (their numbers stay used)",
                    created.len()
                ),
            ))
        }
    }
}

type Failure = (String, ClientError);

/// Creates the items, then links them, sets their status, adds comments and
/// deletes the deleted ones. Answers old ref → new ref.
async fn write(
    client: &Client,
    ws: &str,
    plan: &[Planned],
    created: &mut Vec<String>,
) -> Result<HashMap<String, String>, Failure> {
    let mut mapping = HashMap::new();
    for p in plan {
        let item = client.create_item(ws, &p.new).await.map_err(|e| (p.old.clone(), e))?;
        let new = item.item_ref.to_string();
        created.push(new.clone());
        mapping.insert(p.old.clone(), new);
    }
    for p in plan {
        let new = &mapping[&p.old];
        let patch = ItemPatch {
            status: (p.status != Status::Open).then_some(p.status),
            parent: p.parent.as_ref().map(|r| Some(mapping[r].clone())),
            blocked_by: (!p.blocked_by.is_empty()).then(|| p.blocked_by.iter().map(|r| mapping[r].clone()).collect()),
            ..Default::default()
        };
        if patch != ItemPatch::default() {
            client.update_item(ws, new, &patch).await.map_err(|e| (p.old.clone(), e))?;
        }
        for body in &p.comments {
            client.add_comment(ws, new, &NewComment { body: body.clone() }).await.map_err(|e| (p.old.clone(), e))?;
        }
    }
    for p in plan.iter().filter(|p| p.deleted) {
        client.delete_item(ws, &mapping[&p.old], &Default::default()).await.map_err(|e| (p.old.clone(), e))?;
    }
    Ok(mapping)
}

fn report(ctx: &Ctx, ws: &str, plan: &[Planned], mapping: &HashMap<String, String>) -> Result<(), CliError> {
    let moved: Vec<(&str, &str)> =
        plan.iter().map(|p| (p.old.as_str(), mapping[&p.old].as_str())).filter(|(o, n)| o != n).collect();
    let value = serde_json::json!({
        "workspace": ws,
        "imported": plan.len(),
        "kept": plan.len() - moved.len(),
        "mapped": moved.iter().map(|(o, n)| serde_json::json!({"from": o, "to": n})).collect::<Vec<_>>(),
    });
    ctx.emit(&value, |_| {
        let mut out = format!(
            "imported {} items into `{ws}`: {} kept their refs, {} got new ones\n",
            plan.len(),
            plan.len() - moved.len(),
            moved.len()
        );
        for (o, n) in &moved {
            out.push_str(&format!("{o} -> {n}\n"));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_says_the_kinds_in_words() {
        assert_eq!(dry_run_line(1, "ops", &[]), "would import 1 item into `ops` (no new kinds); nothing written\n");
        assert_eq!(
            dry_run_line(3, "ops", &["spike", "epic"]),
            "would import 3 items into `ops` (new kinds: spike, epic); nothing written\n"
        );
    }

    #[test]
    fn github_issues_become_items_with_attributed_comments() {
        let text = r#"[{"number": 12, "title": "Crash", "body": "boom", "state": "CLOSED",
            "labels": [{"name": "bug"}], "comments": [{"author": {"login": "ann"},
            "createdAt": "2026-01-02T03:04:05Z", "body": "fixed"}]},
            {"number": 13, "title": "Idea", "state": "OPEN", "labels": [], "comments": []}]"#;
        let plan = from_github(text).unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!((plan[0].old.as_str(), plan[0].status), ("#12", Status::Done));
        assert_eq!(plan[0].new.labels, vec!["bug".to_string()]);
        assert_eq!(plan[0].comments, vec!["_ann, 2026-01-02T03:04:05Z:_\n\nfixed".to_string()]);
        assert_eq!((plan[1].status, plan[1].new.body.as_str()), (Status::Open, ""));
    }

    #[test]
    fn a_bad_line_is_named() {
        let Err(CliError::Failed { code: 2, message }) = from_export("\n{\"ref\": 1}\n") else { panic!() };
        assert!(message.starts_with("line 2:"), "{message}");
    }
}
