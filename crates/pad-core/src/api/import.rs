//! `POST /api/v1/workspaces/{ws}/import` (docs/api.md, "Import"): a whole
//! import in one request, written in one store transaction, and answered
//! again without writing when its `import_key` was seen before.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::CreateKind;
use crate::model::ValidNewItem;
use crate::validate::{self, Lines, ValidationError};
use crate::{NewItem, Status};

/// Items in one import. A bigger file is refused before anything is read
/// into the store; docs/operations.md, "Export and import", says how to split one.
pub const IMPORT_ITEMS_MAX: usize = 2000;
/// Kinds one import may add.
pub const IMPORT_KINDS_MAX: usize = 50;
/// Comments per imported item.
pub const IMPORT_COMMENTS_MAX: usize = 500;
/// Writes in one import, in all: each item, comment, link (a parent or a
/// blocker) and deletion is one (docs/api.md, "Limits").
pub const IMPORT_WRITES_MAX: usize = 20_000;
/// The longest `import_key` and file ref.
pub const IMPORT_KEY_MAX: usize = 128;
const FILE_REF_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// Names this import in its workspace: a second import with the same key
    /// writes nothing and answers the first one's result. `pad import` uses
    /// `sha256:` and the hex SHA-256 of the file.
    #[schema(min_length = 1, max_length = 128)]
    pub import_key: String,
    /// Kinds to add first, unless a kind of that name exists already.
    #[serde(default)]
    pub kinds: Vec<CreateKind>,
    /// Created in this order: where a kind's numbers are free, an item in
    /// number order gets its old number back.
    pub items: Vec<ImportItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportItem {
    /// The item's ref in the file (`TASK-5`, `#12`): links name these.
    #[serde(rename = "ref")]
    #[schema(min_length = 1, max_length = 64)]
    pub file_ref: String,
    /// The item, without links (`parent` and `blocked_by` here are refused:
    /// the links below name refs in the file).
    pub item: NewItem,
    /// `open` when left out.
    #[serde(default = "open")]
    pub status: Status,
    /// A ref in the file.
    #[serde(default)]
    pub parent: Option<String>,
    /// Refs in the file.
    #[serde(default)]
    pub blocked_by: Vec<String>,
    /// Comment bodies, oldest first.
    #[serde(default)]
    pub comments: Vec<String>,
    /// Imported, then deleted (its number stays used, as in the source).
    #[serde(default)]
    pub deleted: bool,
}

fn open() -> Status {
    Status::Open
}

/// One item's ref in the file and in the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportedRef {
    pub from: String,
    pub to: String,
}

/// The answer, the same for the import that wrote and for every replay of
/// its key (`replayed` aside).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportResult {
    pub import_key: String,
    /// Items created (deleted ones included).
    pub imported: usize,
    /// Every item of the request, in its order.
    pub refs: Vec<ImportedRef>,
    /// When the import was written.
    pub created_at: DateTime<Utc>,
    /// True when this key had been imported before and nothing was written now.
    #[serde(default)]
    pub replayed: bool,
}

/// An item to create, checked, with its links still in the file's refs.
#[derive(Debug, Clone)]
pub struct ValidImportItem {
    pub file_ref: String,
    pub item: ValidNewItem,
    pub status: Status,
    pub parent: Option<String>,
    pub blocked_by: Vec<String>,
    pub comments: Vec<String>,
    pub deleted: bool,
}

impl ImportRequest {
    /// What this import writes, as [`IMPORT_WRITES_MAX`] counts it: each
    /// item, comment, link (a parent or a blocker) and deletion is one.
    pub fn writes(&self) -> usize {
        self.items
            .iter()
            .map(|it| {
                1 + it.comments.len() + usize::from(it.parent.is_some()) + it.blocked_by.len() + usize::from(it.deleted)
            })
            .sum()
    }

    /// Every check that needs no store: sizes, fields, and that each link
    /// names an item of the request. Fields are named by their place
    /// (`items[3].item.title`).
    pub fn validate(&self) -> Result<Vec<ValidImportItem>, ValidationError> {
        validate::text("import_key", &self.import_key, 1, IMPORT_KEY_MAX, Lines::Single)?;
        if self.items.is_empty() {
            return Err(ValidationError::new("items", "an import needs at least one item"));
        }
        if self.items.len() > IMPORT_ITEMS_MAX {
            return Err(ValidationError::new(
                "items",
                format!(
                    "at most {IMPORT_ITEMS_MAX} items per import, this one has {}: split the file",
                    self.items.len()
                ),
            ));
        }
        if self.kinds.len() > IMPORT_KINDS_MAX {
            return Err(ValidationError::new("kinds", format!("at most {IMPORT_KINDS_MAX} kinds per import")));
        }
        for (i, k) in self.kinds.iter().enumerate() {
            validate::validate_kind_name(&format!("kinds[{i}].name"), &k.name)?;
            validate::validate_prefix(&format!("kinds[{i}].prefix"), &k.prefix)?;
        }
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, it) in self.items.iter().enumerate() {
            let field = format!("items[{i}].ref");
            validate::text(&field, &it.file_ref, 1, FILE_REF_MAX, Lines::Single)?;
            if let Some(first) = index.insert(&it.file_ref, i) {
                return Err(ValidationError::new(field, format!("{} is also items[{first}]", it.file_ref)));
            }
        }
        let writes = self.writes();
        if writes > IMPORT_WRITES_MAX {
            return Err(ValidationError::new(
                "items",
                format!(
                    "at most {IMPORT_WRITES_MAX} writes per import (each item, comment, link and deletion is one), \
                     this one has {writes}: split the file by kind or number range"
                ),
            ));
        }
        let mut out = Vec::with_capacity(self.items.len());
        for (i, it) in self.items.iter().enumerate() {
            let at = |e: ValidationError| ValidationError::new(format!("items[{i}].item.{}", e.field), e.message);
            if it.item.parent.is_some() || !it.item.blocked_by.is_empty() {
                return Err(ValidationError::new(
                    format!("items[{i}].item"),
                    "links go in the import item's `parent` and `blocked_by`, as refs in the file",
                ));
            }
            let item = it.item.validate().map_err(at)?;
            for (j, link) in it.parent.iter().chain(&it.blocked_by).enumerate() {
                if !index.contains_key(link.as_str()) {
                    let field = if it.parent.is_some() && j == 0 {
                        format!("items[{i}].parent")
                    } else {
                        format!("items[{i}].blocked_by")
                    };
                    return Err(ValidationError::new(
                        field,
                        format!(
                            "{} links to {link}, which is not in the import: export the whole workspace",
                            it.file_ref
                        ),
                    ));
                }
            }
            if it.comments.len() > IMPORT_COMMENTS_MAX {
                return Err(ValidationError::new(
                    format!("items[{i}].comments"),
                    format!("at most {IMPORT_COMMENTS_MAX} comments per item"),
                ));
            }
            for (j, c) in it.comments.iter().enumerate() {
                validate::validate_comment(c)
                    .map_err(|e| ValidationError::new(format!("items[{i}].comments[{j}]"), e.message))?;
            }
            out.push(ValidImportItem {
                file_ref: it.file_ref.clone(),
                item,
                status: it.status,
                parent: it.parent.clone(),
                blocked_by: it.blocked_by.clone(),
                comments: it.comments.clone(),
                deleted: it.deleted,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(r: &str) -> ImportItem {
        ImportItem {
            file_ref: r.into(),
            item: NewItem { title: format!("item {r}"), ..Default::default() },
            status: Status::Open,
            parent: None,
            blocked_by: vec![],
            comments: vec![],
            deleted: false,
        }
    }

    fn request(items: Vec<ImportItem>) -> ImportRequest {
        ImportRequest { import_key: "k".into(), kinds: vec![], items }
    }

    #[test]
    fn a_link_out_of_the_import_is_named() {
        let mut a = item("TASK-1");
        a.blocked_by = vec!["TASK-9".into()];
        let e = request(vec![a, item("TASK-2")]).validate().unwrap_err();
        assert_eq!(e.field, "items[0].blocked_by");
        assert!(e.message.contains("TASK-9"), "{}", e.message);
    }

    #[test]
    fn sizes_and_duplicates_are_refused_with_the_field() {
        let e = request(vec![]).validate().unwrap_err();
        assert_eq!(e.field, "items");
        let e = request((0..=IMPORT_ITEMS_MAX).map(|i| item(&format!("T-{i}"))).collect()).validate().unwrap_err();
        assert!(e.message.contains("split the file"), "{}", e.message);
        let e = request(vec![item("A"), item("A")]).validate().unwrap_err();
        assert_eq!(e.field, "items[1].ref");
        let mut bad = item("B");
        bad.item.title = " ".into();
        let e = request(vec![item("A"), bad]).validate().unwrap_err();
        assert_eq!(e.field, "items[1].item.title");
        // The total: per-item caps met, the sum past it; at it is fine.
        let mut many: Vec<ImportItem> = (0..IMPORT_ITEMS_MAX).map(|i| item(&format!("T-{i}"))).collect();
        let per_item = IMPORT_WRITES_MAX / IMPORT_ITEMS_MAX - 1;
        for it in &mut many {
            it.comments = vec!["c".into(); per_item];
        }
        assert_eq!(request(many.clone()).writes(), IMPORT_WRITES_MAX);
        request(many.clone()).validate().unwrap();
        many[0].blocked_by = vec!["T-1".into()];
        let e = request(many).validate().unwrap_err();
        assert_eq!(e.field, "items");
        assert!(e.message.contains(&format!("this one has {}", IMPORT_WRITES_MAX + 1)), "{}", e.message);
        let mut key = request(vec![item("A")]);
        key.import_key = String::new();
        assert_eq!(key.validate().unwrap_err().field, "import_key");
    }
}
