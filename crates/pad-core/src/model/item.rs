//! An item as it is read, what it was (history) and what was said about it
//! (comments), and the pure steps of an update.

use super::*;

/// An item as shown on the API. `lease` is present only while a live lease
/// exists (docs/api.md), so readers never see an expired one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Item {
    #[serde(rename = "ref")]
    #[schema(value_type = String, example = "TASK-5")]
    pub item_ref: ItemRef,
    pub kind: String,
    pub title: String,
    pub body: String,
    pub status: Status,
    pub priority: Priority,
    pub labels: Vec<String>,
    #[schema(value_type = Option<String>)]
    pub parent: Option<ItemRef>,
    #[schema(value_type = Vec<String>)]
    pub blocked_by: Vec<ItemRef>,
    /// The blockers that still block: neither done, cancelled nor deleted.
    #[serde(default)]
    #[schema(value_type = Vec<String>)]
    pub blocked_by_open: Vec<ItemRef>,
    pub assignee: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime<Utc>>,
    pub comments_count: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// L12: the note the live lease's holder wrote (claim, refresh or renew),
    /// present only while that lease is live: progress anyone can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_note: Option<String>,
    /// L16: claim-next and the frontier skip the item until then.
    #[serde(default)]
    pub not_before: Option<DateTime<Utc>>,
    /// L14: how many times a holder reported failure.
    #[serde(default)]
    pub failures: i64,
    /// L14: after a failure, claim-next and the frontier skip the item until then.
    #[serde(default)]
    pub retry_at: Option<DateTime<Utc>>,
    /// L14: the note of the last failure.
    #[serde(default)]
    pub last_failure_note: Option<String>,
    /// L14: when the last failure was reported.
    #[serde(default)]
    pub last_failure_at: Option<DateTime<Utc>>,
    /// L14: when the item last succeeded: a complete (L15), or a release by
    /// a holder whose work succeeded. Later than `last_failure_at`: the last
    /// outcome was a success.
    #[serde(default)]
    pub last_success_at: Option<DateTime<Utc>>,
    /// L18: the last lease that ended, and how.
    #[serde(default)]
    pub last_lease: Option<crate::lease::LastLease>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Comment {
    pub id: i64,
    pub author: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

/// One history version: who changed what, when. `changes` maps each field to
/// `{"from": old, "to": new}`; the first version records creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Version {
    pub version: i64,
    pub actor: String,
    pub at: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub changes: serde_json::Value,
}

impl Item {
    /// Whether the last outcome reported was a success (L14): it succeeded,
    /// and failed at most before that. `item show` says "Outcome: succeeded"
    /// for such an item; its failure count is kept as history.
    pub fn succeeded_last(&self) -> bool {
        self.last_success_at.is_some_and(|s| self.last_failure_at.is_none_or(|f| s >= f))
    }

    /// Whether the item is failing: it has failed, and not succeeded since.
    pub fn failing(&self) -> bool {
        self.failures > 0 && !self.succeeded_last()
    }

    /// The item after `patch`, or an error naming the field. Backends resolve
    /// and check links themselves; this is the shared, pure part of an update.
    pub fn patched(&self, patch: &ValidPatch) -> Result<Item, ValidationError> {
        let mut new = self.clone();
        if let Some(t) = &patch.title {
            new.title = t.clone();
        }
        if let Some(b) = &patch.body {
            new.body = b.clone();
        }
        if let Some(k) = &patch.kind {
            new.kind = k.clone();
        }
        if let Some(s) = patch.status {
            new.status = s;
        }
        if let Some(p) = patch.priority {
            new.priority = p;
        }
        new.labels = patch.apply_labels(&self.labels)?;
        if let Some(p) = &patch.parent {
            if p.as_ref() == Some(&self.item_ref) {
                return Err(ValidationError::new("parent", "an item cannot be its own parent"));
            }
            new.parent = p.clone();
        }
        if let Some(b) = &patch.blocked_by {
            new.blocked_by = b.clone();
        }
        for b in &patch.add_blocked_by {
            if !new.blocked_by.contains(b) {
                new.blocked_by.push(b.clone());
            }
        }
        new.blocked_by.retain(|b| !patch.remove_blocked_by.contains(b));
        if new.blocked_by.contains(&self.item_ref) {
            let field = if patch.add_blocked_by.contains(&self.item_ref) { "add_blocked_by" } else { "blocked_by" };
            return Err(ValidationError::new(field, "an item cannot block itself"));
        }
        // The cap holds for the list the update leaves, not only for each
        // list sent (docs/api.md, "Limits"). An item over it from before this
        // check may keep or shrink its list, so it can still be edited.
        let count = new.blocked_by.len();
        if count > BLOCKED_BY_MAX && count > self.blocked_by.len() {
            return Err(ValidationError::new(
                "add_blocked_by",
                format!(
                    "an item may have at most {BLOCKED_BY_MAX} blockers; this update would leave {count} (remove some with remove_blocked_by)"
                ),
            ));
        }
        new.blocked_by.sort_by(|a, b| (&a.prefix, a.number).cmp(&(&b.prefix, b.number)));
        if let Some(a) = &patch.assignee {
            new.assignee = a.clone();
        }
        if let Some(n) = patch.not_before {
            new.not_before = n;
        }
        Ok(new)
    }

    /// What [`Item::changes_since`] gives for a version that only moves the
    /// status from `from` to `to` (a complete, L15), without the rest of the item.
    pub fn status_changes(from: Status, to: Status) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        out.insert("status".into(), serde_json::json!({ "from": from, "to": to }));
        out
    }

    /// The content fields that differ from `old`, as `{field: {from, to}}`:
    /// the body of a history version. Empty when nothing changed.
    pub fn changes_since(&self, old: Option<&Item>) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::{Value, json};
        let fields = |i: &Item| -> Vec<(&'static str, Value)> {
            vec![
                ("title", json!(i.title)),
                ("body", json!(i.body)),
                ("kind", json!(i.kind)),
                ("status", json!(i.status)),
                ("priority", json!(i.priority)),
                ("labels", json!(i.labels)),
                ("parent", json!(i.parent)),
                ("blocked_by", json!(i.blocked_by)),
                ("assignee", json!(i.assignee)),
                ("not_before", json!(i.not_before)),
                ("deleted_at", json!(i.deleted_at)),
            ]
        };
        let before = old.map(fields);
        let mut out = serde_json::Map::new();
        for (idx, (name, to)) in fields(self).into_iter().enumerate() {
            let from = before.as_ref().map_or(Value::Null, |b| b[idx].1.clone());
            let empty = |v: &Value| v.is_null() || v == &json!("") || v == &json!([]);
            if from != to && !(old.is_none() && empty(&to)) {
                out.insert(name.to_string(), json!({ "from": from, "to": to }));
            }
        }
        out
    }
}
