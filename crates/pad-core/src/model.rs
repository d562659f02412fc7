//! The item model of docs/api.md: identifiers, enums, and the shapes that
//! cross the API. Every input type has one `validate` that every store calls.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::lease::Lease;
use crate::validate::{self, Lines, ValidationError};
use chrono::{DateTime, Utc};

pub const TITLE_MAX: usize = 500;
pub const BODY_MAX_BYTES: usize = 256 * 1024;
pub const LABELS_MAX: usize = 50;
pub const LABEL_MAX: usize = 64;
pub const NAME_MAX: usize = 200;
pub const COMMENT_MAX_BYTES: usize = 64 * 1024;
/// Items one item may be blocked by.
pub const BLOCKED_BY_MAX: usize = 100;
/// Kinds one frontier filter may name.
pub const KINDS_FILTER_MAX: usize = 50;
/// The longest item ref: a 10-character prefix, `-`, and a 19-digit number.
pub const REF_MAX: usize = 30;
const REF_PATTERN: &str = "^[A-Za-z][A-Za-z0-9]{0,9}-[1-9][0-9]*$";

/// Marks work that autonomous workers must skip (docs/leases.md).
pub const NEEDS_HUMAN: &str = "needs-human";

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }

        // Written out, not derived: the derive would name the variants, not their wire text.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }
        impl ToSchema for $name {}

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl FromStr for $name {
            type Err = ValidationError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s.to_ascii_lowercase().as_str() {
                    $($text => Ok($name::$variant),)+
                    _ => Err(ValidationError::new(
                        stringify!($name).to_ascii_lowercase(),
                        format!("{s:?} is not one of: {}", [$($text),+].join(", ")),
                    )),
                }
            }
        }
    };
}
pub(crate) use string_enum;

string_enum!(
    /// A member's role in a workspace.
    Role { Owner = "owner", Editor = "editor", Viewer = "viewer" }
);
string_enum!(
    /// `done` and `cancelled` are terminal.
    Status { Open = "open", InProgress = "in-progress", Done = "done", Cancelled = "cancelled" }
);
string_enum!(
    /// Ordered: `Low < Medium < High < Critical`.
    Priority { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
);

string_enum!(
    /// L18: how a lease ended (docs/leases.md L18).
    LeaseEnd {
        Expired = "expired",
        Released = "released",
        Broken = "broken",
        Failed = "failed",
        Completed = "completed",
    }
);
string_enum!(
    /// The kinds of event the log records (docs/api.md, events).
    EventKind {
        ItemCreated = "item.created",
        ItemUpdated = "item.updated",
        ItemDeleted = "item.deleted",
        ItemRestored = "item.restored",
        CommentCreated = "comment.created",
        LeaseClaimed = "lease.claimed",
        LeaseReleased = "lease.released",
        LeaseBroken = "lease.broken",
        LeaseExpired = "lease.expired",
        LeaseFailed = "lease.failed",
        ItemQuarantined = "item.quarantined",
    }
);

#[allow(clippy::derivable_impls)] // the macro-made enum cannot take `#[default]`
impl Default for Priority {
    fn default() -> Self {
        Priority::Medium
    }
}

impl Status {
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Done | Status::Cancelled)
    }
}

impl Priority {
    /// A rank for ordering in SQL: higher is more urgent.
    pub fn rank(self) -> i64 {
        self as i64
    }
    pub fn from_rank(rank: i64) -> Option<Self> {
        Self::ALL.get(usize::try_from(rank).ok()?).copied()
    }
}

/// A workspace slug: `^[a-z0-9][a-z0-9-]{0,62}$`.
pub fn validate_slug(field: &str, s: &str) -> Result<(), ValidationError> {
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.len() <= 63;
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("{s:?} is not a slug (lower-case letters, digits and '-', 1-63 characters, not starting with '-')"),
        ))
    }
}

/// A kind's ref prefix: `^[A-Z][A-Z0-9]{0,9}$`.
pub fn validate_prefix(field: &str, s: &str) -> Result<(), ValidationError> {
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && s.len() <= 10;
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("{s:?} is not a prefix (an upper-case letter, then up to 9 upper-case letters or digits)"),
        ))
    }
}

/// A kind's name: lower-case, like a slug but at most 32 characters.
pub fn validate_kind_name(field: &str, s: &str) -> Result<(), ValidationError> {
    validate_slug(field, s)?;
    if s.len() > 32 { Err(ValidationError::new(field, "must be at most 32 characters")) } else { Ok(()) }
}

/// A comma is refused: everywhere a list of labels is written as text (CLI
/// flags, the list filter, the web form) a comma separates two labels, so a
/// label holding one could be written but never found (README.md, "Lists of
/// values").
pub fn validate_label(field: &str, s: &str) -> Result<(), ValidationError> {
    validate::text(field, s, 1, LABEL_MAX, Lines::Single)?;
    if s.contains(',') {
        return Err(ValidationError::new(
            field,
            format!("{s:?} contains a comma, which separates labels; use two labels or another character"),
        ));
    }
    Ok(())
}

/// Holders and session ids: free labels of 1-200 characters on one line.
pub fn validate_name(field: &str, s: &str) -> Result<(), ValidationError> {
    validate::text(field, s, 1, NAME_MAX, Lines::Single)
}

/// The default kinds every new workspace gets.
pub const DEFAULT_KINDS: &[(&str, &str)] = &[("task", "TASK"), ("bug", "BUG"), ("feature", "FEAT"), ("chore", "CHORE")];

/// An item's ref, `PREFIX-N`. Parsed case-insensitively, printed upper-case.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemRef {
    pub prefix: String,
    pub number: i64,
}

impl ItemRef {
    pub fn parse_field(field: &str, s: &str) -> Result<Self, ValidationError> {
        let bad = || ValidationError::new(field, format!("{s:?} is not an item ref (like TASK-5)"));
        let (prefix, number) = s.rsplit_once('-').ok_or_else(bad)?;
        let prefix = prefix.to_ascii_uppercase();
        validate_prefix(field, &prefix).map_err(|_| bad())?;
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) || number.starts_with('0') {
            return Err(bad());
        }
        let number: i64 = number.parse().map_err(|_| bad())?;
        Ok(ItemRef { prefix, number })
    }
}

impl FromStr for ItemRef {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_field("ref", s)
    }
}

impl fmt::Display for ItemRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.prefix, self.number)
    }
}

impl Serialize for ItemRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ItemRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for ItemRef {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some("^[A-Za-z][A-Za-z0-9]{0,9}-[1-9][0-9]*$"))
            .examples(["TASK-5"])
            .into()
    }
}
impl ToSchema for ItemRef {}

/// Workspace settings that bound leases and quarantine (docs/leases.md L8, L13).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceSettings {
    pub default_ttl_seconds: u32,
    pub max_ttl_seconds: u32,
    pub quarantine_after_expiries: u32,
    /// L14: the wait after a first failure; it doubles with each failure.
    pub retry_backoff_base_seconds: u32,
    /// L14: the longest wait after a failure.
    pub retry_backoff_max_seconds: u32,
    /// L14: failures that quarantine an item (0 turns it off).
    pub quarantine_after_failures: u32,
}

impl Default for WorkspaceSettings {
    fn default() -> Self {
        Self {
            default_ttl_seconds: 15 * 60,
            max_ttl_seconds: crate::lease::TTL_MAX_SECONDS,
            quarantine_after_expiries: 3,
            retry_backoff_base_seconds: 30,
            retry_backoff_max_seconds: 3600,
            quarantine_after_failures: 3,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Workspace {
    #[serde(skip)]
    pub id: i64,
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub settings: WorkspaceSettings,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Kind {
    pub name: String,
    pub prefix: String,
}

/// A person or program that authenticates with tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct User {
    #[serde(skip)]
    pub id: i64,
    pub email: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Member {
    pub email: String,
    pub role: Role,
    pub added_at: DateTime<Utc>,
}

/// A token as listed: never the secret, which is shown once at creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub email: String,
    /// The one workspace the token reaches; `null`: all of its user's.
    pub workspace: Option<String>,
    /// The role cap of a scoped token; `null` when unscoped.
    pub role: Option<Role>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

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
    /// L18: the last lease that ended, and how.
    #[serde(default)]
    pub last_lease: Option<crate::lease::LastLease>,
}

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
fn labels_schema() -> utoipa::openapi::schema::Array {
    string_array(LABELS_MAX, 1, LABEL_MAX, None)
}

fn refs_schema() -> utoipa::openapi::schema::Array {
    string_array(BLOCKED_BY_MAX, 1, REF_MAX, Some(REF_PATTERN))
}

fn exclude_schema() -> utoipa::openapi::schema::Array {
    string_array(EXCLUDE_MAX, 1, REF_MAX, Some(REF_PATTERN))
}

/// An optional item ref: a ref or `null`.
fn ref_schema() -> utoipa::openapi::schema::Object {
    let mut s = string_schema(1, REF_MAX, Some(REF_PATTERN));
    s.schema_type =
        utoipa::openapi::schema::SchemaType::Array(vec![utoipa::openapi::Type::String, utoipa::openapi::Type::Null]);
    s
}

fn string_schema(min: usize, max: usize, pattern: Option<&str>) -> utoipa::openapi::schema::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .min_length(Some(min))
        .max_length(Some(max))
        .pattern(pattern)
        .build()
}

fn string_array(items: usize, min: usize, max: usize, pattern: Option<&str>) -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new().items(string_schema(min, max, pattern)).max_items(Some(items)).build()
}

fn kinds_schema() -> utoipa::openapi::schema::Array {
    string_array(KINDS_FILTER_MAX, 1, 32, None)
}

/// Validated links and labels shared by create and update.
fn check_labels(field: &str, labels: &[String]) -> Result<Vec<String>, ValidationError> {
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

fn check_refs(field: &str, refs: &[String]) -> Result<Vec<ItemRef>, ValidationError> {
    if refs.len() > BLOCKED_BY_MAX {
        return Err(ValidationError::new(field, format!("at most {BLOCKED_BY_MAX} items (got {})", refs.len())));
    }
    let mut out: Vec<ItemRef> = Vec::with_capacity(refs.len());
    for (i, r) in refs.iter().enumerate() {
        let r = ItemRef::parse_field(&format!("{field}[{i}]"), r)?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

fn check_title(t: &str) -> Result<(), ValidationError> {
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
        let blocked_by = check_refs("blocked_by", &self.blocked_by)?;
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
fn some_or_null<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
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
    /// The label set after applying `labels`, then `add_labels`, then `remove_labels`.
    pub fn apply_labels(&self, current: &[String]) -> Result<Vec<String>, ValidationError> {
        let mut out = self.labels.clone().unwrap_or_else(|| current.to_vec());
        for l in &self.add_labels {
            if !out.contains(l) {
                out.push(l.clone());
            }
        }
        out.retain(|l| !self.remove_labels.contains(l));
        if out.len() > LABELS_MAX {
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
        let blocked_by = self.blocked_by.as_deref().map(|b| check_refs("blocked_by", b)).transpose()?;
        let add_blocked_by = check_refs("add_blocked_by", &self.add_blocked_by)?;
        let remove_blocked_by = check_refs("remove_blocked_by", &self.remove_blocked_by)?;
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Comment {
    pub id: i64,
    pub author: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

pub fn validate_comment(body: &str) -> Result<(), ValidationError> {
    validate::body("body", body, COMMENT_MAX_BYTES)?;
    if body.trim().is_empty() { Err(ValidationError::new("body", "must not be empty")) } else { Ok(()) }
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

/// Filters of `list`. All are optional; given ones are ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemFilter {
    pub status: Vec<Status>,
    pub kind: Vec<String>,
    /// All of these labels.
    pub labels: Vec<String>,
    pub priority: Vec<Priority>,
    pub assignee: Option<String>,
    /// `Some(true)`: only items with a live lease; `Some(false)`: only without.
    pub leased: Option<bool>,
    /// Case-insensitive substring of title or body.
    pub q: Option<String>,
    /// Only children of this item.
    pub parent: Option<ItemRef>,
    pub include_deleted: bool,
}

pub const LIST_LIMIT_DEFAULT: u32 = 50;
pub const LIST_LIMIT_MAX: u32 = 500;

/// Keyset pagination: `cursor` is opaque to clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

impl Item {
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
        new.blocked_by.sort_by(|a, b| (&a.prefix, a.number).cmp(&(&b.prefix, b.number)));
        if let Some(a) = &patch.assignee {
            new.assignee = a.clone();
        }
        if let Some(n) = patch.not_before {
            new.not_before = n;
        }
        Ok(new)
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

/// Filters of the event log: given ones are ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub item_ref: Option<ItemRef>,
    /// Any of these kinds.
    pub kinds: Vec<EventKind>,
}

/// One entry of a workspace's event log (docs/api.md, Events). Ids increase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(rename = "ref")]
    pub item_ref: Option<String>,
    /// The member who caused it; `null` for what the store observed itself (an expiry).
    pub actor: Option<String>,
    pub at: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_parse_case_insensitively_and_print_upper() {
        let r: ItemRef = "task-5".parse().unwrap();
        assert_eq!(r.to_string(), "TASK-5");
        for bad in [
            "",
            "TASK",
            "TASK-",
            "-5",
            "TASK-0",
            "TASK-05",
            "TA SK-1",
            "TASK-1x",
            "1ASK-1",
            "TOOLONGPREFIX-1",
            "TASK-99999999999999999999",
        ] {
            assert!(bad.parse::<ItemRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn slugs() {
        assert!(validate_slug("slug", "default").is_ok());
        assert!(validate_slug("slug", "a-1").is_ok());
        assert!(validate_slug("slug", &"a".repeat(63)).is_ok());
        for bad in ["", "-a", "A", "a_b", "a b", &"a".repeat(64)] {
            assert!(validate_slug("slug", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_item_validation_names_the_field() {
        let ok = NewItem { title: "x".into(), ..Default::default() };
        assert_eq!(ok.validate().unwrap().kind, "task");
        let e = NewItem { title: "a\0".into(), ..Default::default() }.validate().unwrap_err();
        assert_eq!(e.field, "title");
        let e = NewItem { title: "x".into(), labels: vec!["ok".into(), "".into()], ..Default::default() }
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "labels[1]");
        let e =
            NewItem { title: "x".into(), parent: Some("nope".into()), ..Default::default() }.validate().unwrap_err();
        assert_eq!(e.field, "parent");
        let e = NewItem { title: "x".repeat(501), ..Default::default() }.validate().unwrap_err();
        assert_eq!(e.field, "title");
    }

    #[test]
    fn patch_distinguishes_null_from_absent() {
        let p: ItemPatch = serde_json::from_str(r#"{"assignee": null}"#).unwrap();
        assert_eq!(p.assignee, Some(None));
        let p: ItemPatch = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(p.assignee, None);
        assert!(serde_json::from_str::<ItemPatch>(r#"{"titel": "x"}"#).is_err());
    }

    /// The OpenAPI attributes take literals; these are the constants the
    /// validation enforces.
    #[test]
    fn the_schema_states_the_enforced_limits() {
        use utoipa::PartialSchema;
        let new = serde_json::to_value(NewItem::schema()).unwrap();
        let patch = serde_json::to_value(ItemPatch::schema()).unwrap();
        let filter = serde_json::to_value(FrontierFilter::schema()).unwrap();
        for p in [&new["properties"], &patch["properties"]] {
            assert_eq!(p["title"]["minLength"], 1);
            assert_eq!(p["title"]["maxLength"], TITLE_MAX);
            assert_eq!(p["body"]["maxLength"], BODY_MAX_BYTES);
            assert_eq!(p["labels"]["maxItems"], LABELS_MAX);
            assert_eq!(p["labels"]["items"]["maxLength"], LABEL_MAX);
            assert_eq!(p["blocked_by"]["maxItems"], BLOCKED_BY_MAX);
            assert_eq!(p["blocked_by"]["items"]["maxLength"], REF_MAX);
            assert_eq!(p["assignee"]["maxLength"], 254);
        }
        assert_eq!(filter["properties"]["kinds"]["maxItems"], KINDS_FILTER_MAX);
        assert_eq!(filter["properties"]["without_labels"]["items"]["maxLength"], LABEL_MAX);
        let longest = format!("ABCDEFGHIJ-{}", i64::MAX);
        assert_eq!(longest.len(), REF_MAX);
        assert!(longest.parse::<ItemRef>().is_ok());
    }

    #[test]
    fn priority_ranks_round_trip() {
        for p in Priority::ALL {
            assert_eq!(Priority::from_rank(p.rank()), Some(*p));
        }
        assert!(Priority::Critical > Priority::Low);
    }
}

/// The filters of frontier and claim-next (L11). Given ones are ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FrontierFilter {
    /// Any of these kinds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = kinds_schema)]
    pub kinds: Vec<String>,
    /// All of these labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = labels_schema)]
    pub labels: Vec<String>,
    /// None of these labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = labels_schema)]
    pub without_labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_priority: Option<Priority>,
    /// Only children of this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = ref_schema)]
    pub parent: Option<String>,
    /// Skip work marked `needs-human`: what autonomous workers should set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub autonomous: bool,
    /// Skip these refs (at most 500): work a drain will not run again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = exclude_schema)]
    pub exclude: Vec<String>,
}

/// A [`FrontierFilter`] after validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidFrontierFilter {
    pub kinds: Vec<String>,
    pub labels: Vec<String>,
    /// Includes `needs-human` when `autonomous` was set.
    pub without_labels: Vec<String>,
    pub min_priority: Option<Priority>,
    pub parent: Option<ItemRef>,
    pub exclude: Vec<ItemRef>,
}

/// The most refs a frontier filter may exclude.
pub const EXCLUDE_MAX: usize = 500;

impl FrontierFilter {
    pub fn validate(&self) -> Result<ValidFrontierFilter, ValidationError> {
        if self.kinds.len() > KINDS_FILTER_MAX {
            return Err(ValidationError::new(
                "kinds",
                format!("at most {KINDS_FILTER_MAX} kinds (got {})", self.kinds.len()),
            ));
        }
        let mut kinds = Vec::with_capacity(self.kinds.len());
        for (i, k) in self.kinds.iter().enumerate() {
            let k = k.to_ascii_lowercase();
            validate_kind_name(&format!("kinds[{i}]"), &k)?;
            kinds.push(k);
        }
        let labels = check_labels("labels", &self.labels)?;
        let mut without_labels = check_labels("without_labels", &self.without_labels)?;
        if self.autonomous && !without_labels.iter().any(|l| l == NEEDS_HUMAN) {
            without_labels.push(NEEDS_HUMAN.to_string());
        }
        let parent = self.parent.as_deref().map(|p| ItemRef::parse_field("parent", p)).transpose()?;
        if self.exclude.len() > EXCLUDE_MAX {
            return Err(ValidationError::new(
                "exclude",
                format!("at most {EXCLUDE_MAX} refs (got {})", self.exclude.len()),
            ));
        }
        let exclude = check_refs("exclude", &self.exclude)?;
        Ok(ValidFrontierFilter { kinds, labels, without_labels, min_priority: self.min_priority, parent, exclude })
    }
}

#[cfg(test)]
mod fuzz {
    //! Parsers under arbitrary input: they never panic, accept exactly their
    //! grammar, and what they accept round-trips.
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ref_parser_accepts_its_grammar_only(s in "\\PC{0,24}") {
            if let Ok(r) = s.parse::<ItemRef>() {
                prop_assert_eq!(r.to_string(), s.to_ascii_uppercase());
                prop_assert!(r.number >= 1);
                prop_assert!(validate_prefix("p", &r.prefix).is_ok());
            }
        }

        #[test]
        fn well_formed_refs_round_trip(prefix in "[A-Za-z][A-Za-z0-9]{0,9}", n in 1i64..i64::MAX) {
            let r: ItemRef = format!("{prefix}-{n}").parse().unwrap();
            prop_assert_eq!(r.number, n);
            prop_assert_eq!(r.prefix, prefix.to_ascii_uppercase());
        }

        #[test]
        fn slugs_match_the_documented_pattern(s in "\\PC{0,70}") {
            let pattern = s.len() <= 63
                && s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            prop_assert_eq!(validate_slug("slug", &s).is_ok(), pattern);
        }

        #[test]
        fn labels_refuse_controls_and_bound_length(s in "\\PC{0,80}|[\\x00-\\x1f]{1,3}") {
            let ok = validate_label("label", &s).is_ok();
            let n = s.chars().count();
            let visible = !s.chars().any(|c| c.is_control() || validate::is_invisible(c));
            prop_assert_eq!(ok, (1..=LABEL_MAX).contains(&n) && visible && !s.contains(','));
        }

        #[test]
        fn item_bodies_never_panic(title in "\\PC{0,600}", labels in proptest::collection::vec("\\PC{0,70}", 0..60)) {
            let new = NewItem { title, labels, ..Default::default() };
            let _ = new.validate();
        }
    }
}
