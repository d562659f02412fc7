//! `pad export` and `pad import` (docs/operations.md, "Export and import"):
//! one workspace as JSON Lines, over the HTTP API, so they work against any
//! server and any backend.
//!
//! Import is one request, written by the server in one transaction
//! (`POST …/import`): killed or refused, it wrote nothing, and its key (the
//! file's SHA-256) makes a re-run of the same file write nothing twice.
//! Refs are kept when free: items are created in number order, so in a
//! workspace whose counter for a kind has not passed the file's first
//! number, each gets its old ref back.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use pad_client::{Client, ClientError};
use pad_core::api::{CreateKind, ImportItem, ImportRequest, ImportResult, ImportedRef, ListQuery};
use pad_core::{Comment, Item, NewItem, Priority, Status, Version};
use serde::{Deserialize, Serialize};

use super::Ctx;
use crate::error::CliError;
use crate::output;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write here instead of stdout
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// `pad export` output, a `gh issue list --json number,title,body,state,labels,comments` array, or `-`
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Check everything and say what would be imported, writing nothing
    #[arg(long)]
    pub dry_run: bool,
}

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

/// The request for `plan`, keyed by the file's content: a re-run of the
/// same file (after a crash, or by mistake) is answered from the first
/// import and writes nothing (docs/operations.md, "Export and import").
fn request(text: &str, plan: &[Planned], kinds: Vec<CreateKind>) -> ImportRequest {
    use sha2::Digest;
    ImportRequest {
        import_key: format!("sha256:{}", hex::encode(sha2::Sha256::digest(text.as_bytes()))),
        kinds,
        items: plan
            .iter()
            .map(|p| ImportItem {
                file_ref: p.old.clone(),
                item: p.new.clone(),
                status: p.status,
                parent: p.parent.clone(),
                blocked_by: p.blocked_by.clone(),
                comments: p.comments.clone(),
                deleted: p.deleted,
            })
            .collect(),
    }
}

/// The server's checks, made here first so a bad file fails before any
/// network call, its item named by its ref in the file.
fn check_file(req: &ImportRequest) -> Result<(), CliError> {
    req.validate().map(drop).map_err(|e| {
        let place = e
            .field
            .strip_prefix("items[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(i, rest)| Some((req.items.get(i.parse::<usize>().ok()?)?, rest)));
        match place {
            Some((item, rest)) => {
                let field = rest.trim_start_matches('.').trim_start_matches("item.");
                CliError::usage(format!("{}: {field}: {}", item.file_ref, e.message))
            }
            None => CliError::usage(format!("{}: {}", e.field, e.message)),
        }
    })
}

/// The checks that need the workspace: kinds to create (refusing a prefix
/// another kind holds), and assignees who are not members here (left out,
/// and said).
async fn check_workspace(client: &Client, ws: &str, plan: &mut [Planned]) -> Result<Vec<CreateKind>, CliError> {
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
    check_file(&request(&text, &plan, vec![]))?;
    let client = ctx.client()?;
    let ws = ctx.ws();
    let kinds = check_workspace(&client, ws, &mut plan).await?;
    if args.dry_run {
        let new_kinds: Vec<&str> = kinds.iter().map(|k| k.name.as_str()).collect();
        return output::print(&dry_run_line(plan.len(), ws, &new_kinds));
    }
    // One request, one transaction: killed or refused, it wrote nothing.
    let result = client
        .import(ws, &request(&text, &plan, kinds))
        .await
        .map_err(|e| CliError::from(e).map_message(|m| format!("import failed: {m}; nothing was written")))?;
    report(ctx, ws, &result)
}

fn report(ctx: &Ctx, ws: &str, result: &ImportResult) -> Result<(), CliError> {
    let moved: Vec<&ImportedRef> = result.refs.iter().filter(|r| r.from != r.to).collect();
    let value = serde_json::json!({
        "workspace": ws,
        "imported": result.imported,
        "kept": result.imported - moved.len(),
        "mapped": moved.iter().map(|r| serde_json::json!({"from": r.from, "to": r.to})).collect::<Vec<_>>(),
        "replayed": result.replayed,
        "import_key": result.import_key,
    });
    ctx.emit(&value, |_| {
        let mut out = if result.replayed {
            format!(
                "already imported into `{ws}` on {}: this file's {} items were imported then; nothing written now\n",
                output::at(result.created_at, chrono::Utc::now()),
                result.imported
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "imported {} items into `{ws}`: {} kept their refs, {} got new ones\n",
            result.imported,
            result.imported - moved.len(),
            moved.len()
        ));
        for r in &moved {
            out.push_str(&format!("{} -> {}\n", r.from, r.to));
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
        let Err(e) = from_export("\n{\"ref\": 1}\n") else { panic!() };
        let (2, message) = (e.exit_code(), e.to_string()) else { panic!("{e}") };
        assert!(message.starts_with("line 2:"), "{message}");
    }
}
