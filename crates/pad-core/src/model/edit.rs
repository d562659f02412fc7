//! What a caller asks to create or change, and its one validation, which
//! every store calls before writing.

use super::*;

/// Input of `create`. Strings are raw; [`NewItem::validate`] is the one place
/// they are checked, and every store calls it before writing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewItem {
    #[schema(min_length = 1, max_length = 500)]
    pub title: String,
    /// Markdown, at most 256 KiB of UTF-8.
    #[serde(default)]
    #[schema(max_length = 262144)]
    pub body: String,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9][A-Za-z0-9-]*$")]
    pub kind: Option<String>,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub labels: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = ref_schema)]
    pub parent: Option<String>,
    #[serde(default)]
    #[schema(schema_with = refs_schema)]
    pub blocked_by: Vec<String>,
    /// A member's email.
    #[serde(default)]
    #[schema(min_length = 3, max_length = 254)]
    pub assignee: Option<String>,
    /// L16: defer until this time.
    #[serde(default)]
    pub not_before: Option<DateTime<Utc>>,
}

/// The OpenAPI schemas of these fields state the limits the validation
/// enforces; `the_schema_states_the_enforced_limits` keeps the two equal.
pub(super) fn labels_schema() -> utoipa::openapi::schema::Array {
    string_array(LABELS_MAX, 1, LABEL_MAX, None)
}

pub(super) fn refs_schema() -> utoipa::openapi::schema::Array {
    string_array(BLOCKED_BY_MAX, 1, REF_MAX, Some(REF_PATTERN))
}

pub(super) fn exclude_schema() -> utoipa::openapi::schema::Array {
    string_array(EXCLUDE_MAX, 1, REF_MAX, Some(REF_PATTERN))
}

/// An optional item ref: a ref or `null`.
pub(super) fn ref_schema() -> utoipa::openapi::schema::Object {
    let mut s = string_schema(1, REF_MAX, Some(REF_PATTERN));
    s.schema_type =
        utoipa::openapi::schema::SchemaType::Array(vec![utoipa::openapi::Type::String, utoipa::openapi::Type::Null]);
    s
}

pub(super) fn string_schema(min: usize, max: usize, pattern: Option<&str>) -> utoipa::openapi::schema::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .min_length(Some(min))
        .max_length(Some(max))
        .pattern(pattern)
        .build()
}

pub(super) fn string_array(
    items: usize, min: usize, max: usize, pattern: Option<&str>,
) -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new().items(string_schema(min, max, pattern)).max_items(Some(items)).build()
}

pub(super) fn kinds_schema() -> utoipa::openapi::schema::Array {
    string_array(KINDS_FILTER_MAX, 1, 32, None)
}

/// Validated links and labels shared by create and update.
pub(super) fn check_labels(field: &str, labels: &[String]) -> Result<Vec<String>, ValidationError> {
    if labels.len() > LABELS_MAX {
        return Err(ValidationError::new(field, format!("at most {LABELS_MAX} labels (got {})", labels.len())));
    }
    let mut out: Vec<String> = Vec::with_capacity(labels.len());
    for (i, l) in labels.iter().enumerate() {
        validate_label(&format!("{field}[{i}]"), l)?;
        if !out.contains(l) {
            out.push(l.clone());
        }
    }
    Ok(out)
}

/// At most `max` refs, parsed, duplicates dropped (first one kept).
pub(super) fn check_refs(field: &str, refs: &[String], max: usize) -> Result<Vec<ItemRef>, ValidationError> {
    if refs.len() > max {
        return Err(ValidationError::new(field, format!("at most {max} refs (got {})", refs.len())));
    }
    let mut seen = std::collections::HashSet::with_capacity(refs.len());
    let mut out: Vec<ItemRef> = Vec::with_capacity(refs.len());
    for (i, r) in refs.iter().enumerate() {
        let r = ItemRef::parse_field(&format!("{field}[{i}]"), r)?;
        if seen.insert(r.clone()) {
            out.push(r);
        }
    }
    Ok(out)
}

pub(super) fn check_title(t: &str) -> Result<(), ValidationError> {
    validate::text("title", t, 1, TITLE_MAX, Lines::Single)?;
    if t.trim().is_empty() { Err(ValidationError::new("title", "must not be blank")) } else { Ok(()) }
}

/// A [`NewItem`] after validation: refs parsed, labels de-duplicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidNewItem {
    pub title: String,
    pub body: String,
    pub kind: String,
    pub priority: Priority,
    pub labels: Vec<String>,
    pub parent: Option<ItemRef>,
    pub blocked_by: Vec<ItemRef>,
    pub assignee: Option<String>,
    pub not_before: Option<DateTime<Utc>>,
}

impl NewItem {
    pub fn validate(&self) -> Result<ValidNewItem, ValidationError> {
        check_title(&self.title)?;
        validate::body("body", &self.body, BODY_MAX_BYTES)?;
        let kind = self.kind.clone().unwrap_or_else(|| "task".into()).to_ascii_lowercase();
        validate_kind_name("kind", &kind)?;
        let labels = check_labels("labels", &self.labels)?;
        let parent = self.parent.as_deref().map(|p| ItemRef::parse_field("parent", p)).transpose()?;
        let blocked_by = check_refs("blocked_by", &self.blocked_by, BLOCKED_BY_MAX)?;
        if let Some(a) = &self.assignee {
            validate::email("assignee", a)?;
        }
        Ok(ValidNewItem {
            title: self.title.clone(),
            body: self.body.clone(),
            kind,
            priority: self.priority.unwrap_or_default(),
            labels,
            parent,
            blocked_by,
            assignee: self.assignee.clone(),
            not_before: self.not_before,
        })
    }
}

/// Distinguishes "absent" from "null" for fields that can be cleared.
pub(super) fn some_or_null<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Input of `update`: every field optional; `parent` and `assignee` may be
/// set to `null` to clear them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemPatch {
    #[serde(default)]
    #[schema(min_length = 1, max_length = 500)]
    pub title: Option<String>,
    /// Markdown, at most 256 KiB of UTF-8.
    #[serde(default)]
    #[schema(max_length = 262144)]
    pub body: Option<String>,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9][A-Za-z0-9-]*$")]
    pub kind: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Replaces the whole label set.
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub labels: Option<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub add_labels: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub remove_labels: Vec<String>,
    #[serde(default, deserialize_with = "some_or_null", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 30, pattern = "^[A-Za-z][A-Za-z0-9]{0,9}-[1-9][0-9]*$")]
    pub parent: Option<Option<String>>,
    #[serde(default)]
    #[schema(schema_with = refs_schema)]
    pub blocked_by: Option<Vec<String>>,
    /// Adds blockers, after `blocked_by` and before `remove_blocked_by`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = refs_schema)]
    pub add_blocked_by: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = refs_schema)]
    pub remove_blocked_by: Vec<String>,
    #[serde(default, deserialize_with = "some_or_null", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, min_length = 3, max_length = 254)]
    pub assignee: Option<Option<String>>,
    /// L16: defer until this time; `null` clears it.
    #[serde(default, deserialize_with = "some_or_null", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub not_before: Option<Option<DateTime<Utc>>>,
    /// Optimistic concurrency: refuse with `update_conflict` if the item changed since.
    #[serde(default)]
    pub expected_updated_at: Option<DateTime<Utc>>,
    /// Fencing (L10): refuse with `lease_lost` unless the live lease has this epoch.
    #[serde(default)]
    pub lease_epoch: Option<i64>,
    /// Fencing by handle (L17), in place of or with `lease_epoch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidPatch {
    pub title: Option<String>,
    pub body: Option<String>,
    pub kind: Option<String>,
    pub status: Option<Status>,
    pub priority: Option<Priority>,
    pub labels: Option<Vec<String>>,
    pub add_labels: Vec<String>,
    pub remove_labels: Vec<String>,
    pub parent: Option<Option<ItemRef>>,
    pub blocked_by: Option<Vec<ItemRef>>,
    pub add_blocked_by: Vec<ItemRef>,
    pub remove_blocked_by: Vec<ItemRef>,
    pub assignee: Option<Option<String>>,
    pub not_before: Option<Option<DateTime<Utc>>>,
    pub expected_updated_at: Option<DateTime<Utc>>,
    pub fence: crate::lease::LeaseHandle,
}

impl ValidPatch {
    /// The label set after applying `labels`, then `add_labels`, then
    /// `remove_labels`. More than [`LABELS_MAX`] is refused only when the
    /// item would also gain labels: quarantine adds `needs-human` to an item
    /// that may already have 50 (docs/api.md, "Limits"), and such an item
    /// must stay editable.
    pub fn apply_labels(&self, current: &[String]) -> Result<Vec<String>, ValidationError> {
        let mut out = self.labels.clone().unwrap_or_else(|| current.to_vec());
        for l in &self.add_labels {
            if !out.contains(l) {
                out.push(l.clone());
            }
        }
        out.retain(|l| !self.remove_labels.contains(l));
        if out.len() > LABELS_MAX && out.len() > current.len() {
            return Err(ValidationError::new("labels", format!("at most {LABELS_MAX} labels (got {})", out.len())));
        }
        Ok(out)
    }
}

impl ItemPatch {
    pub fn validate(&self) -> Result<ValidPatch, ValidationError> {
        if let Some(t) = &self.title {
            check_title(t)?;
        }
        if let Some(b) = &self.body {
            validate::body("body", b, BODY_MAX_BYTES)?;
        }
        let kind = self.kind.as_ref().map(|k| k.to_ascii_lowercase());
        if let Some(k) = &kind {
            validate_kind_name("kind", k)?;
        }
        let labels = self.labels.as_deref().map(|l| check_labels("labels", l)).transpose()?;
        let add_labels = check_labels("add_labels", &self.add_labels)?;
        let remove_labels = check_labels("remove_labels", &self.remove_labels)?;
        let parent = match &self.parent {
            None => None,
            Some(None) => Some(None),
            Some(Some(p)) => Some(Some(ItemRef::parse_field("parent", p)?)),
        };
        let blocked_by = self.blocked_by.as_deref().map(|b| check_refs("blocked_by", b, BLOCKED_BY_MAX)).transpose()?;
        let add_blocked_by = check_refs("add_blocked_by", &self.add_blocked_by, BLOCKED_BY_MAX)?;
        let remove_blocked_by = check_refs("remove_blocked_by", &self.remove_blocked_by, BLOCKED_BY_MAX)?;
        if let Some(Some(a)) = &self.assignee {
            validate::email("assignee", a)?;
        }
        Ok(ValidPatch {
            title: self.title.clone(),
            body: self.body.clone(),
            kind,
            status: self.status,
            priority: self.priority,
            labels,
            add_labels,
            remove_labels,
            parent,
            blocked_by,
            add_blocked_by,
            remove_blocked_by,
            assignee: self.assignee.clone(),
            not_before: self.not_before,
            expected_updated_at: self.expected_updated_at,
            fence: crate::lease::LeaseHandle { epoch: self.lease_epoch, lease_id: self.lease_id },
        })
    }
}
