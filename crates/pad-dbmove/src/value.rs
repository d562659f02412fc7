//! Column types and values, and the one table that says how a column of one
//! backend becomes a column of the other (docs/operations.md, "What is
//! copied"). A new column needs nothing here unless it brings a new SQL
//! type; a new SQL type is one arm in `Phys::from_sqlite`/`from_postgres`.

use chrono::{DateTime, Utc};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

/// A column's type as one backend stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phys {
    Int,
    Real,
    Text,
    Bytes,
    Bool,
    /// PostgreSQL `timestamptz`; SQLite keeps times as INTEGER microseconds.
    Time,
    /// PostgreSQL `jsonb`; SQLite keeps JSON as TEXT.
    Json,
    /// PostgreSQL `text[]`; SQLite keeps a JSON array of strings as TEXT.
    TextArray,
}

impl Phys {
    /// SQLite's declared type, by its affinity rules.
    pub fn from_sqlite(decl: &str) -> Option<Phys> {
        let d = decl.to_ascii_uppercase();
        if d.contains("INT") {
            Some(Phys::Int)
        } else if d.contains("CHAR") || d.contains("TEXT") || d.contains("CLOB") {
            Some(Phys::Text)
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            Some(Phys::Real)
        } else if d.contains("BLOB") {
            Some(Phys::Bytes)
        } else if d.contains("BOOL") {
            Some(Phys::Int)
        } else {
            None
        }
    }

    /// PostgreSQL's `format_type` of the column.
    pub fn from_postgres(ty: &str) -> Option<Phys> {
        Some(match ty {
            "bigint" | "integer" | "smallint" => Phys::Int,
            "double precision" | "real" => Phys::Real,
            "text" => Phys::Text,
            t if t.starts_with("character") => Phys::Text,
            "bytea" => Phys::Bytes,
            "boolean" => Phys::Bool,
            "timestamp with time zone" => Phys::Time,
            "jsonb" | "json" => Phys::Json,
            "text[]" => Phys::TextArray,
            _ => return None,
        })
    }

    /// The type both sides agree a column holds, given how each stores it.
    pub fn common(a: Phys, b: Phys) -> Option<Phys> {
        use Phys::*;
        match (a, b) {
            _ if a == b => Some(a),
            (Int, Time) | (Time, Int) => Some(Time),
            (Text, Json) | (Json, Text) => Some(Json),
            (Text, TextArray) | (TextArray, Text) => Some(TextArray),
            (Int, Bool) | (Bool, Int) => Some(Bool),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
    Bool(bool),
    Time(DateTime<Utc>),
    Json(Json),
    TextArray(Vec<String>),
}

/// A value that cannot become the column's type (a malformed JSON text, say).
#[derive(Debug)]
pub struct Unconvertible(pub String);

impl Value {
    /// This value, read as stored, as the agreed type `to`.
    pub fn into_logical(self, to: Phys) -> Result<Value, Unconvertible> {
        Ok(match (self, to) {
            (Value::Null, _) => Value::Null,
            (Value::Int(us), Phys::Time) => Value::Time(
                DateTime::from_timestamp_micros(us).ok_or_else(|| Unconvertible(format!("{us} µs is not a time")))?,
            ),
            (Value::Text(s), Phys::Json) => {
                Value::Json(serde_json::from_str(&s).map_err(|e| Unconvertible(format!("{s:?} is not JSON: {e}")))?)
            }
            (Value::Text(s), Phys::TextArray) => Value::TextArray(
                serde_json::from_str(&s)
                    .map_err(|e| Unconvertible(format!("{s:?} is not a JSON array of strings: {e}")))?,
            ),
            (Value::Int(i), Phys::Bool) => Value::Bool(i != 0),
            (v, _) => v,
        })
    }

    /// An agreed-type value as a column stored as `phys` holds it.
    pub fn into_stored(self, phys: Phys) -> Value {
        match (self, phys) {
            (Value::Time(t), Phys::Int) => Value::Int(t.timestamp_micros()),
            (Value::Json(j), Phys::Text) => Value::Text(j.to_string()),
            (Value::TextArray(a), Phys::Text) => Value::Text(Json::from(a).to_string()),
            (Value::Bool(b), Phys::Int) => Value::Int(i64::from(b)),
            (v, _) => v,
        }
    }

    /// Feeds an encoding of the value that does not depend on the backend
    /// (JSON objects with their keys sorted) to a checksum.
    fn digest(&self, h: &mut Sha256) {
        fn bytes(h: &mut Sha256, tag: u8, b: &[u8]) {
            h.update([tag]);
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        }
        match self {
            Value::Null => h.update([0]),
            Value::Int(i) => bytes(h, 1, &i.to_le_bytes()),
            Value::Real(f) => bytes(h, 2, &f.to_bits().to_le_bytes()),
            Value::Text(s) => bytes(h, 3, s.as_bytes()),
            Value::Bytes(b) => bytes(h, 4, b),
            Value::Bool(b) => bytes(h, 5, &[u8::from(*b)]),
            Value::Time(t) => bytes(h, 6, &t.timestamp_micros().to_le_bytes()),
            Value::Json(j) => bytes(h, 7, canonical_json(j).as_bytes()),
            Value::TextArray(a) => {
                h.update([8]);
                h.update((a.len() as u64).to_le_bytes());
                for s in a {
                    bytes(h, 3, s.as_bytes());
                }
            }
        }
    }
}

/// JSON with object keys sorted at every level: `jsonb` reorders keys, so
/// the text as stored cannot be compared across backends.
fn canonical_json(j: &Json) -> String {
    match j {
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Json::from(k.as_str()), canonical_json(&map[k.as_str()])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Json::Array(items) => format!("[{}]", items.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// A table's row count and an order-independent checksum of its rows (the
/// wrapping sum of each row's SHA-256, first 16 bytes), so source and target
/// can be compared whatever order each reads its rows in.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TableSum {
    pub rows: u64,
    pub sum: u128,
}

impl TableSum {
    pub fn add(&mut self, row: &[Value]) {
        let mut h = Sha256::new();
        for v in row {
            v.digest(&mut h);
        }
        let d = h.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&d[..16]);
        self.rows += 1;
        self.sum = self.sum.wrapping_add(u128::from_le_bytes(first));
    }

    pub fn hex(&self) -> String {
        format!("{:032x}", self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sqlite_and_postgres_columns_agree_on_a_type() {
        let s = |d| Phys::from_sqlite(d).unwrap();
        let p = |t| Phys::from_postgres(t).unwrap();
        assert_eq!(Phys::common(s("INTEGER"), p("timestamp with time zone")), Some(Phys::Time));
        assert_eq!(Phys::common(s("TEXT"), p("jsonb")), Some(Phys::Json));
        assert_eq!(Phys::common(p("text[]"), s("TEXT")), Some(Phys::TextArray));
        assert_eq!(Phys::common(s("INTEGER"), p("integer")), Some(Phys::Int));
        assert_eq!(Phys::common(s("TEXT"), p("bigint")), None);
        assert_eq!(Phys::from_postgres("uuid"), None);
    }

    #[test]
    fn values_round_trip_between_the_stored_forms() {
        let t = Value::Int(1_764_590_400_123_456).into_logical(Phys::Time).unwrap();
        assert_eq!(t.clone().into_stored(Phys::Int), Value::Int(1_764_590_400_123_456));
        assert_eq!(t.clone().into_stored(Phys::Time), t);
        let labels = Value::Text(r#"["a","b c"]"#.into()).into_logical(Phys::TextArray).unwrap();
        assert_eq!(labels, Value::TextArray(vec!["a".into(), "b c".into()]));
        assert_eq!(labels.into_stored(Phys::Text), Value::Text(r#"["a","b c"]"#.into()));
        assert!(Value::Text("{".into()).into_logical(Phys::Json).is_err());
        assert_eq!(Value::Null.into_logical(Phys::Time).unwrap(), Value::Null);
    }

    #[test]
    fn checksums_ignore_row_order_and_json_key_order() {
        let rows = [
            vec![Value::Int(1), Value::Json(json!({"a": 1, "b": [2, {"y": 1, "x": 2}]}))],
            vec![Value::Int(2), Value::Null],
        ];
        let (mut one, mut two) = (TableSum::default(), TableSum::default());
        one.add(&rows[0]);
        one.add(&rows[1]);
        two.add(&rows[1]);
        two.add(&[
            Value::Int(1),
            serde_json::from_str::<Json>(r#"{"b":[2,{"x":2,"y":1}],"a":1}"#).map(Value::Json).unwrap(),
        ]);
        assert_eq!(one, two);
        let mut three = TableSum::default();
        three.add(&rows[0]);
        three.add(&[Value::Int(3), Value::Null]);
        assert_ne!(one, three);
    }
}
