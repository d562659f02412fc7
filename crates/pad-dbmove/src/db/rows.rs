//! Rows: read in write order, inserted in batches, and updated one at a
//! time for a table's references to itself.

use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value as Json;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{AssertSqlSafe, Postgres, QueryBuilder, Row, Sqlite};

use super::{Column, Db, Table, db_err, quote};
use crate::MoveError;
use crate::value::{Phys, Value};

impl Db {
    /// Reads `columns` of `table` in its write order, each value as stored.
    pub fn rows<'a>(&'a mut self, table: &Table, columns: &[Column]) -> BoxStream<'a, Result<Vec<Value>, MoveError>> {
        let select: Vec<String> = columns
            .iter()
            .map(|c| match (&*self, c.phys) {
                // Read integers and JSON in one width/type whatever the column's.
                (Db::Postgres(_), Phys::Int) => format!("{}::int8", quote(&c.name)),
                (Db::Postgres(_), Phys::Real) => format!("{}::float8", quote(&c.name)),
                (Db::Postgres(_), Phys::Json) => format!("{}::jsonb", quote(&c.name)),
                _ => quote(&c.name),
            })
            .collect();
        let sql = format!("SELECT {} FROM {} ORDER BY {}", select.join(", "), quote(&table.name), table.order_by);
        let phys: Vec<Phys> = columns.iter().map(|c| c.phys).collect();
        let what = format!("reading {}", table.name);
        match self {
            Db::Sqlite(c) => {
                let stream = sqlx::query(AssertSqlSafe(sql)).fetch(c);
                stream
                    .map(move |r| {
                        r.and_then(|row| sqlite_row(&row, &phys)).map_err(|e| MoveError::Failed(format!("{what}: {e}")))
                    })
                    .boxed()
            }
            Db::Postgres(c) => {
                let stream = sqlx::query(AssertSqlSafe(sql)).fetch(c);
                stream
                    .map(move |r| {
                        r.and_then(|row| pg_row(&row, &phys)).map_err(|e| MoveError::Failed(format!("{what}: {e}")))
                    })
                    .boxed()
            }
        }
    }

    /// Inserts rows (values already in this backend's stored form).
    pub async fn insert(&mut self, table: &Table, columns: &[Column], rows: Vec<Vec<Value>>) -> Result<(), MoveError> {
        if rows.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = columns.iter().map(|c| quote(&c.name)).collect();
        let head = format!("INSERT INTO {} ({}) ", quote(&table.name), names.join(", "));
        let phys: Vec<Phys> = columns.iter().map(|c| c.phys).collect();
        let what = format!("writing {}", table.name);
        match self {
            Db::Sqlite(c) => {
                let mut qb = QueryBuilder::<Sqlite>::new(head);
                qb.push_values(rows, |mut b, row| {
                    for (v, p) in row.into_iter().zip(&phys) {
                        match (v, p) {
                            (Value::Int(i), _) => b.push_bind(i),
                            (Value::Real(f), _) => b.push_bind(f),
                            (Value::Text(s), _) => b.push_bind(s),
                            (Value::Bytes(x), _) => b.push_bind(x),
                            (Value::Bool(x), _) => b.push_bind(x),
                            (Value::Null, _) => b.push_bind(None::<i64>),
                            // Converted to stored forms before this point.
                            (Value::Time(_) | Value::Json(_) | Value::TextArray(_), _) => {
                                unreachable!("SQLite stores no {p:?}")
                            }
                        };
                    }
                });
                qb.build().execute(c).await.map(drop).map_err(db_err(&what))
            }
            Db::Postgres(c) => {
                let overriding = if columns.iter().any(|c| c.identity) { "OVERRIDING SYSTEM VALUE " } else { "" };
                let mut qb = QueryBuilder::<Postgres>::new(format!("{head}{overriding}"));
                qb.push_values(rows, |mut b, row| {
                    for (v, p) in row.into_iter().zip(&phys) {
                        // Nulls carry the column's type: PostgreSQL checks it.
                        match (v, p) {
                            (Value::Int(i), _) => b.push_bind(i),
                            (Value::Real(f), _) => b.push_bind(f),
                            (Value::Text(s), _) => b.push_bind(s),
                            (Value::Bytes(x), _) => b.push_bind(x),
                            (Value::Bool(x), _) => b.push_bind(x),
                            (Value::Time(t), _) => b.push_bind(t),
                            (Value::Json(j), _) => b.push_bind(j),
                            (Value::TextArray(a), _) => b.push_bind(a),
                            (Value::Null, Phys::Int) => b.push_bind(None::<i64>),
                            (Value::Null, Phys::Real) => b.push_bind(None::<f64>),
                            (Value::Null, Phys::Text) => b.push_bind(None::<String>),
                            (Value::Null, Phys::Bytes) => b.push_bind(None::<Vec<u8>>),
                            (Value::Null, Phys::Bool) => b.push_bind(None::<bool>),
                            (Value::Null, Phys::Time) => b.push_bind(None::<DateTime<Utc>>),
                            (Value::Null, Phys::Json) => b.push_bind(None::<Json>),
                            (Value::Null, Phys::TextArray) => b.push_bind(None::<Vec<String>>),
                        };
                    }
                });
                qb.build().execute(c).await.map(drop).map_err(db_err(&what))
            }
        }
    }

    /// Sets `column` of the row whose primary key is `key` (second pass for
    /// a table's references to itself, e.g. an item's parent).
    pub async fn update_one(
        &mut self, table: &Table, key: &[(String, Value)], column: &Column, value: Value,
    ) -> Result<(), MoveError> {
        let mut pieces = vec![(column.name.clone(), value, column.phys)];
        let mut sql = format!("UPDATE {} SET {} = ", quote(&table.name), quote(&column.name));
        let mut n = 1;
        let placeholder = |n: usize, this: &Db| match this {
            Db::Sqlite(_) => "?".to_string(),
            Db::Postgres(_) => format!("${n}"),
        };
        sql.push_str(&placeholder(n, self));
        for (i, (k, v)) in key.iter().enumerate() {
            n += 1;
            sql.push_str(if i == 0 { " WHERE " } else { " AND " });
            sql.push_str(&format!("{} = {}", quote(k), placeholder(n, self)));
            let phys = table.column(k).map_or(Phys::Int, |c| c.phys);
            pieces.push((k.clone(), v.clone(), phys));
        }
        let what = format!("updating {}", table.name);
        match self {
            Db::Sqlite(c) => {
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for (_, v, _) in pieces {
                    q = match v {
                        Value::Int(i) => q.bind(i),
                        Value::Text(s) => q.bind(s),
                        Value::Real(f) => q.bind(f),
                        Value::Bytes(b) => q.bind(b),
                        Value::Bool(b) => q.bind(b),
                        _ => q.bind(None::<i64>),
                    };
                }
                q.execute(c).await.map(drop).map_err(db_err(&what))
            }
            Db::Postgres(c) => {
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for (_, v, _) in pieces {
                    q = match v {
                        Value::Int(i) => q.bind(i),
                        Value::Text(s) => q.bind(s),
                        Value::Real(f) => q.bind(f),
                        Value::Bytes(b) => q.bind(b),
                        Value::Bool(b) => q.bind(b),
                        Value::Time(t) => q.bind(t),
                        Value::Json(j) => q.bind(j),
                        Value::TextArray(a) => q.bind(a),
                        Value::Null => q.bind(None::<i64>),
                    };
                }
                q.execute(c).await.map(drop).map_err(db_err(&what))
            }
        }
    }
}

fn sqlite_row(row: &SqliteRow, phys: &[Phys]) -> Result<Vec<Value>, sqlx::Error> {
    let mut out = Vec::with_capacity(phys.len());
    for (i, p) in phys.iter().enumerate() {
        let v = match p {
            Phys::Int | Phys::Bool | Phys::Time => row.try_get::<Option<i64>, _>(i)?.map(Value::Int),
            Phys::Real => row.try_get::<Option<f64>, _>(i)?.map(Value::Real),
            Phys::Text | Phys::Json | Phys::TextArray => row.try_get::<Option<String>, _>(i)?.map(Value::Text),
            Phys::Bytes => row.try_get::<Option<Vec<u8>>, _>(i)?.map(Value::Bytes),
        };
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(out)
}

fn pg_row(row: &PgRow, phys: &[Phys]) -> Result<Vec<Value>, sqlx::Error> {
    let mut out = Vec::with_capacity(phys.len());
    for (i, p) in phys.iter().enumerate() {
        let v = match p {
            Phys::Int => row.try_get::<Option<i64>, _>(i)?.map(Value::Int),
            Phys::Real => row.try_get::<Option<f64>, _>(i)?.map(Value::Real),
            Phys::Text => row.try_get::<Option<String>, _>(i)?.map(Value::Text),
            Phys::Bytes => row.try_get::<Option<Vec<u8>>, _>(i)?.map(Value::Bytes),
            Phys::Bool => row.try_get::<Option<bool>, _>(i)?.map(Value::Bool),
            Phys::Time => row.try_get::<Option<DateTime<Utc>>, _>(i)?.map(Value::Time),
            Phys::Json => row.try_get::<Option<Json>, _>(i)?.map(Value::Json),
            Phys::TextArray => row.try_get::<Option<Vec<String>>, _>(i)?.map(Value::TextArray),
        };
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(out)
}
