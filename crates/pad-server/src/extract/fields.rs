//! The field names a derived `Deserialize` struct declares, read from the
//! type itself: a query parameter none of them names is unknown, whatever
//! serde's message says.

use serde::de::{self, DeserializeOwned, Visitor};

/// `T`'s declared field names (after `rename`); empty when `T` is not a
/// struct.
pub(super) fn declared<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    // The deserializer refuses once it has seen the names, so `T` is never
    // built: the error is expected.
    let _ = T::deserialize(Names(&mut fields));
    fields
}

/// A deserializer that only notes the fields a struct asks for.
struct Names<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for Names<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self, _: &'static str, fields: &'static [&'static str], _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("fields noted"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_declares_its_renamed_fields() {
        let fields = declared::<pad_core::api::EventsQuery>();
        assert!(fields.contains(&"ref") && fields.contains(&"type") && fields.contains(&"after"), "{fields:?}");
        assert!(declared::<String>().is_empty());
    }
}
