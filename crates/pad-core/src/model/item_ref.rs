//! `PREFIX-N`, the name of an item.

use super::*;

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
