//! The item model of docs/api.md: identifiers, enums, and the shapes that
//! cross the API. Every input type has one `validate` that every store calls.
//!
//! Split by concept; everything is re-exported here (and at the crate root),
//! so `pad_core::Item` and `pad_core::model::Item` both name it.

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
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.pad(self.as_str()) }
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

#[cfg(test)]
mod checks;
mod edit;
mod enums;
mod event;
mod filter;
mod item;
mod item_ref;
mod workspace;

pub use crate::validate::{
    validate_comment, validate_kind_name, validate_label, validate_name, validate_prefix, validate_slug,
};
pub use edit::*;
pub use enums::*;
pub use event::*;
pub use filter::*;
pub use item::*;
pub use item_ref::*;
pub use workspace::*;
