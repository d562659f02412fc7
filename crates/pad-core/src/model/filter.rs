//! What list, frontier, claim-next and the event log select, and the page
//! they answer with.

use super::*;

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

/// Filters of the event log: given ones are ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub item_ref: Option<ItemRef>,
    /// Any of these kinds.
    pub kinds: Vec<EventKind>,
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
    /// Skip these refs (at most 500).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = exclude_schema)]
    pub exclude: Vec<String>,
    /// Skip items whose last lease was taken with this session id: the work
    /// a drain session has already done, however much (docs/leases.md,
    /// "Draining").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub skip_session: Option<String>,
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
    pub skip_session: Option<String>,
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
        let exclude = check_refs("exclude", &self.exclude, EXCLUDE_MAX)?;
        if let Some(s) = &self.skip_session {
            crate::validate::validate_name("skip_session", s)?;
        }
        Ok(ValidFrontierFilter {
            kinds,
            labels,
            without_labels,
            min_priority: self.min_priority,
            parent,
            exclude,
            skip_session: self.skip_session.clone(),
        })
    }
}
