//! A whole import in one transaction (docs/api.md, "Import";
//! docs/operations.md, "Export and import"): the kinds it needs, every item,
//! then links, statuses, comments and deletions, then the import's record
//! under its key. A failure anywhere, or a client that goes away, rolls all
//! of it back; a key seen before answers the recorded result and writes
//! nothing, so a re-run after a crash never creates an item twice. So does
//! the request's deadline: it is checked after each item's writes, and the
//! commit is claimed from it ([`Deadline::claim_commit`]), so an import the
//! server answered `503` for committed nothing. On SQLite the statements
//! never yield, so these checks are what ends an import that runs late.

use std::collections::HashMap;

use async_trait::async_trait;
use pad_core::api::{ImportRequest, ImportResult, ImportedRef, ValidImportItem};
use pad_core::lease::LeaseHandle;
use pad_core::{ItemPatch, ItemRef, Status, Timestamp, ValidationError, Workspace};

use super::items::{Cycles, comment_in, create_in, set_deleted_in, update_in};
use super::{AccountSteps, Begin, WriteTx};
use crate::{Actor, Deadline, StoreError, StoreResult, shared};

/// What a backend's write transaction adds for imports.
#[async_trait]
pub trait ImportSteps: Send {
    /// The recorded result of the import `key` of `ws`, if one committed.
    /// On PostgreSQL it first waits for any other transaction importing
    /// the same key, so two at once write once.
    async fn find_import(&mut self, ws: i64, key: &str) -> StoreResult<Option<String>>;
    /// Records the import and its result (JSON), in the import's transaction.
    async fn insert_import(&mut self, ws: i64, key: &str, actor: Actor, at: Timestamp, result: &str)
    -> StoreResult<()>;
    /// The kind holding `name` or `prefix` in `ws`, if any.
    async fn kind_clash(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<Option<(String, String)>>;
}

/// The request's deadline passed (or was answered) before the import ended.
fn late(deadline: &Deadline) -> StoreResult<()> {
    if deadline.passed() {
        return Err(past_deadline());
    }
    Ok(())
}

fn past_deadline() -> StoreError {
    StoreError::Unavailable(
        "the import did not finish within the request deadline and was rolled back: nothing was written; \
         retry (the same key is safe), or split the file"
            .into(),
    )
}

/// An error of item `i` of the request, its field named by its place.
fn at(i: usize, part: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Validation(v) => {
            StoreError::Validation(ValidationError::new(format!("items[{i}].{part}{}", v.field), v.message))
        }
        other => other,
    }
}

pub async fn import<S>(
    s: &S, ws: &Workspace, actor: Actor, req: &ImportRequest, deadline: &Deadline,
) -> StoreResult<ImportResult>
where
    S: Begin,
    S::Tx: ImportSteps,
{
    let plan = req.validate()?;
    let mut tx = s.begin().await?;
    if let Some(recorded) = tx.find_import(ws.id, &req.import_key).await? {
        tx.rollback().await?;
        let mut result: ImportResult = serde_json::from_str(&recorded)
            .map_err(|e| StoreError::Internal(format!("import {:?}: unreadable record: {e}", req.import_key)))?;
        result.replayed = true;
        return Ok(result);
    }
    for (i, k) in req.kinds.iter().enumerate() {
        match tx.kind_clash(ws.id, &k.name, &k.prefix).await? {
            None => tx.insert_kind(ws.id, &k.name, &k.prefix).await?,
            Some((name, prefix)) if name == k.name && prefix == k.prefix => {}
            Some((name, prefix)) => {
                return Err(StoreError::invalid(
                    &format!("kinds[{i}]"),
                    format!("kind `{}` ({}) clashes with kind `{name}` ({prefix}) here", k.name, k.prefix),
                ));
            }
        }
    }
    let mut refs: HashMap<&str, ItemRef> = HashMap::with_capacity(plan.len());
    let mut last = None;
    for (i, p) in plan.iter().enumerate() {
        let item = create_in(&mut tx, ws, actor, &p.item).await.map_err(|e| at(i, "item.", e))?;
        last = Some(item.updated_at);
        refs.insert(&p.file_ref, item.item_ref);
        late(deadline)?;
    }
    let mut linked = FileLinks::default();
    for (i, p) in plan.iter().enumerate() {
        let r = &refs[p.file_ref.as_str()];
        if let Some(patch) = links(p, &refs) {
            let valid = patch.validate().map_err(|e| at(i, "", e.into()))?;
            linked.add(r, p, &refs).map_err(|e| at(i, "", e))?;
            let (item, _) =
                update_in(&mut tx, ws, actor, r, &valid, Cycles::Checked).await.map_err(|e| at(i, "", e))?;
            last = Some(item.updated_at);
        }
        for (j, body) in p.comments.iter().enumerate() {
            comment_in(&mut tx, ws, actor, r, body).await.map_err(|e| at(i, &format!("comments[{j}]."), e))?;
        }
        late(deadline)?;
    }
    for (i, p) in plan.iter().enumerate().filter(|(_, p)| p.deleted) {
        let r = &refs[p.file_ref.as_str()];
        let (item, _) =
            set_deleted_in(&mut tx, ws, actor, r, LeaseHandle::default(), true).await.map_err(|e| at(i, "", e))?;
        last = Some(item.updated_at);
        late(deadline)?;
    }
    let created_at = last.expect("an import has at least one item");
    let result = ImportResult {
        import_key: req.import_key.clone(),
        imported: plan.len(),
        refs: plan
            .iter()
            .map(|p| ImportedRef { from: p.file_ref.clone(), to: refs[p.file_ref.as_str()].to_string() })
            .collect(),
        created_at,
        replayed: false,
    };
    let recorded = serde_json::to_string(&result).map_err(|e| StoreError::Internal(e.to_string()))?;
    tx.insert_import(ws.id, &req.import_key, actor, created_at, &recorded).await?;
    // Past this point the server waits for the commit instead of answering
    // 503; before it, a late import is dropped here, rolled back.
    if !deadline.claim_commit() {
        return Err(past_deadline());
    }
    tx.commit().await?;
    Ok(result)
}

/// The links an import has set so far, by the refs its items got here. Its
/// items are all new and link only to each other, so these are all the
/// links they have: cycles are found here, in memory, in the order the
/// store would find them, with its messages. Each walk is linear in what it
/// reaches; the store's walks, a query per item, held SQLite's only writer
/// for 22.7 s on 2000 items each blocked by the 9 before (docs/api.md,
/// "Import").
#[derive(Default)]
struct FileLinks {
    parents: HashMap<ItemRef, ItemRef>,
    blockers: HashMap<ItemRef, Vec<ItemRef>>,
}

impl FileLinks {
    /// Item `r`'s links from `p`, refused if they close a cycle.
    fn add(&mut self, r: &ItemRef, p: &ValidImportItem, refs: &HashMap<&str, ItemRef>) -> StoreResult<()> {
        if let Some(parent) = p.parent.as_ref().map(|f| &refs[f.as_str()]) {
            let mut up = Some(parent);
            while let Some(at) = up {
                if at == r {
                    return Err(shared::parent_cycle(r, parent));
                }
                up = self.parents.get(at);
            }
            self.parents.insert(r.clone(), parent.clone());
        }
        if !p.blocked_by.is_empty() {
            self.blockers.insert(r.clone(), p.blocked_by.iter().map(|f| refs[f.as_str()].clone()).collect());
            shared::blocker_cycle(r, |at| self.blockers.get(at).into_iter().flatten())?;
        }
        Ok(())
    }
}

/// The update that gives an item its status and links, now that every
/// item of the import has its ref; `None` when there is none to make.
fn links(p: &ValidImportItem, refs: &HashMap<&str, ItemRef>) -> Option<ItemPatch> {
    let patch = ItemPatch {
        status: (p.status != Status::Open).then_some(p.status),
        parent: p.parent.as_ref().map(|r| Some(refs[r.as_str()].to_string())),
        blocked_by: (!p.blocked_by.is_empty())
            .then(|| p.blocked_by.iter().map(|r| refs[r.as_str()].to_string()).collect()),
        ..Default::default()
    };
    (patch != ItemPatch::default()).then_some(patch)
}
