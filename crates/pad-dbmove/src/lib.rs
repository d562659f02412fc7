//! Moves a whole pad store from one database to another (SQLite ↔
//! PostgreSQL), and takes online SQLite backups. See docs/operations.md.
//!
//! Nothing here lists pad's tables or columns: the copy reads them from the
//! two databases at run time (after the target's migrations ran), insists
//! they match, and converts each column by the pair of SQL types it has on
//! the two sides (`value::Phys::common`). A migration that adds a table or a
//! column is therefore copied without a change here.

mod db;
mod value;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;

pub use db::DbUrl;
use db::{Column, Db, Table};
use value::{Phys, TableSum, Value};

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// Bad arguments: an unknown URL, a missing source.
    #[error("{0}")]
    Usage(String),
    /// The target already holds pad data; nothing was written.
    #[error("{0}")]
    TargetNotEmpty(String),
    /// Source and target schemas differ (different pad versions).
    #[error("{0}")]
    Schema(String),
    /// The database failed, or the verification found a difference.
    #[error("{0}")]
    Failed(String),
}

/// What the copy is doing, for a progress display.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    Copying { table: &'a str, done: u64, total: u64 },
    Verifying { table: &'a str },
}

#[derive(Debug, Clone)]
pub struct TableReport {
    pub table: String,
    pub rows: u64,
    /// Order-independent checksum of the copied columns, equal on both sides.
    pub checksum: String,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub tables: Vec<TableReport>,
    /// (table, column, value): counters set so numbering continues after it.
    pub counters: Vec<(String, String, i64)>,
    pub copy_time: Duration,
    pub verify_time: Duration,
}

/// A counter the two backends keep in different shapes, so it cannot be
/// copied as a column: this list is the one place that knows them. Each
/// rule is skipped where its table, column or sequence does not exist.
struct SharedCounter {
    /// What it numbers, for the report.
    name: &'static str,
    /// SQLite: a column holding the next value to hand out, per row.
    sqlite_next: (&'static str, &'static str),
    /// PostgreSQL: one sequence for the whole database.
    postgres_sequence: &'static str,
    /// Columns holding values it handed out.
    used_in: &'static [(&'static str, &'static str)],
}

const SHARED_COUNTERS: &[SharedCounter] = &[SharedCounter {
    // docs/leases.md L17: lease handles are never reused.
    name: "lease handles",
    sqlite_next: ("workspaces", "next_lease_id"),
    postgres_sequence: "lease_ids",
    used_in: &[("items", "lease_id"), ("items", "last_lease_id"), ("items", "lease_note_lease_id")],
}];

fn is_shared_counter_column(table: &str, column: &str) -> bool {
    SHARED_COUNTERS.iter().any(|c| c.sqlite_next == (table, column))
}

/// How one table is copied: the columns both sides have, in the target's
/// order, each with the type they agree on.
struct Plan {
    source: Table,
    target: Table,
    /// (source column, target column, agreed type)
    columns: Vec<(Column, Column, Phys)>,
    /// Indexes into `columns` of references to the same table (an item's
    /// parent): inserted as NULL, set once every row exists.
    deferred: Vec<usize>,
}

impl Plan {
    fn new(source: Table, target: Table) -> Result<Plan, MoveError> {
        let t = &target.name;
        let mut columns = Vec::new();
        for tc in &target.columns {
            if tc.generated {
                continue;
            }
            match source.column(&tc.name) {
                Some(sc) => {
                    let agreed = Phys::common(sc.phys, tc.phys).ok_or_else(|| {
                        MoveError::Schema(format!(
                            "column {t}.{} is {:?} in the source but {:?} in the target: no conversion is known",
                            tc.name, sc.phys, tc.phys
                        ))
                    })?;
                    columns.push((sc.clone(), tc.clone(), agreed));
                }
                // The target numbers these itself, in the order rows arrive
                // (`kinds.position`, which SQLite keeps as the rowid).
                None if tc.identity => {}
                // Set after the copy, from the source's counter.
                None if is_shared_counter_column(t, &tc.name) => {}
                None => {
                    return Err(MoveError::Schema(format!(
                        "column {t}.{} exists in the target but not in the source",
                        tc.name
                    )));
                }
            }
        }
        for sc in &source.columns {
            if target.column(&sc.name).is_none()
                && !sc.identity
                && !sc.generated
                && !is_shared_counter_column(t, &sc.name)
            {
                return Err(MoveError::Schema(format!(
                    "column {t}.{} exists in the source but not in the target",
                    sc.name
                )));
            }
        }
        let deferred = columns
            .iter()
            .enumerate()
            .filter(|(_, (_, tc, _))| target.foreign_keys.iter().any(|(c, r)| c == &tc.name && r == &target.name))
            .map(|(i, _)| i)
            .collect();
        Ok(Plan { source, target, columns, deferred })
    }

    fn source_columns(&self) -> Vec<Column> {
        self.columns.iter().map(|(s, _, _)| s.clone()).collect()
    }

    fn target_columns(&self) -> Vec<Column> {
        self.columns.iter().map(|(_, t, _)| t.clone()).collect()
    }

    /// A row as stored in one side, in the agreed types.
    fn logical(&self, row: Vec<Value>) -> Result<Vec<Value>, MoveError> {
        row.into_iter()
            .zip(&self.columns)
            .map(|(v, (_, tc, agreed))| {
                v.into_logical(*agreed)
                    .map_err(|e| MoveError::Failed(format!("{}.{}: {}", self.target.name, tc.name, e.0)))
            })
            .collect()
    }
}

/// Tables in an order where every table comes after those it references.
fn dependency_order(plans: Vec<Plan>) -> Result<Vec<Plan>, MoveError> {
    let mut left = plans;
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut ordered = Vec::new();
    while !left.is_empty() {
        let (ready, rest): (Vec<Plan>, Vec<Plan>) = left
            .into_iter()
            .partition(|p| p.target.foreign_keys.iter().all(|(_, r)| r == &p.target.name || done.contains(r)));
        if ready.is_empty() {
            let names: Vec<&str> = rest.iter().map(|p| p.target.name.as_str()).collect();
            return Err(MoveError::Schema(format!("the foreign keys of {names:?} form a cycle")));
        }
        done.extend(ready.iter().map(|p| p.target.name.clone()));
        ordered.extend(ready);
        left = rest;
    }
    Ok(ordered)
}

/// Refuses a target with pad data in it, before anything is written to it.
async fn check_target_empty(to: &DbUrl) -> Result<(), MoveError> {
    if let DbUrl::Sqlite(path) = to
        && !db::sqlite_file_exists(path)
    {
        return Ok(());
    }
    let mut target = Db::connect(to, false).await?;
    let tables = target.table_names().await?;
    let found = target.first_nonempty(&tables).await?;
    target.close().await;
    match found {
        Some((table, n)) => Err(MoveError::TargetNotEmpty(format!(
            "{} already holds pad data ({table} has {n} rows); nothing was written. \
             Migrate into a new, empty database",
            to.display()
        ))),
        None => Ok(()),
    }
}

/// Brings the target's schema up to this pad's, the way `pad serve` does.
async fn apply_migrations(to: &DbUrl) -> Result<(), MoveError> {
    fn failed(to: &DbUrl) -> impl FnOnce(pad_store::StoreError) -> MoveError + '_ {
        move |e| MoveError::Failed(format!("migrating {}: {e}", to.display()))
    }
    match to {
        DbUrl::Sqlite(path) => pad_sqlite::SqliteStore::open(path).await.map_err(failed(to))?.close().await,
        DbUrl::Postgres(url) => pad_postgres::PgStore::open_with(url, 1).await.map_err(failed(to))?.close().await,
    }
    Ok(())
}

/// Copies every table of `from` into `to`, which must hold no pad data,
/// then reads the target back and compares counts and checksums.
pub async fn migrate(
    from: &DbUrl, to: &DbUrl, progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<Report, MoveError> {
    if from == to {
        return Err(MoveError::Usage("--from and --to name the same store".into()));
    }
    let mut source = Db::connect(from, false).await?;
    let Some(source_versions) = source.migration_versions().await? else {
        return Err(MoveError::Usage(format!("{} is not a pad store (no migrations table)", from.display())));
    };
    check_target_empty(to).await?;
    apply_migrations(to).await?;
    let mut target = Db::connect(to, true).await?;
    let target_versions = target.migration_versions().await?.unwrap_or_default();
    if source_versions != target_versions {
        return Err(MoveError::Schema(format!(
            "the source has migrations {source_versions:?} applied, this pad has {target_versions:?}: \
             run this version of `pad serve` on the source once (it upgrades it), then migrate"
        )));
    }

    let started = Instant::now();
    source.begin_snapshot().await?;
    target.begin_write().await?;
    let target_tables = target.table_names().await?;
    // Checked again inside the write transaction: a server may have started
    // on the target (and bootstrapped it) since the first check.
    if let Some((table, n)) = target.first_nonempty(&target_tables).await? {
        let _ = target.execute("ROLLBACK").await;
        return Err(MoveError::TargetNotEmpty(format!(
            "{} already holds pad data ({table} has {n} rows); nothing was written",
            to.display()
        )));
    }
    let source_tables = source.table_names().await?;
    if source_tables != target_tables {
        return Err(MoveError::Schema(format!(
            "the source has tables {source_tables:?} but the target {target_tables:?}"
        )));
    }
    let mut plans = Vec::new();
    for name in &target_tables {
        plans.push(Plan::new(source.describe(name).await?, target.describe(name).await?)?);
    }
    let plans = dependency_order(plans)?;

    let result = copy_all(&mut source, &mut target, &plans, progress).await;
    let (sums, counters) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = target.execute("ROLLBACK").await;
            return Err(e);
        }
    };
    target.execute("COMMIT").await?;
    source.execute("COMMIT").await?;
    source.close().await;
    let copy_time = started.elapsed();

    let started = Instant::now();
    let mut tables = Vec::new();
    for plan in &plans {
        progress(Progress::Verifying { table: &plan.target.name });
        let copied = verify_sum(&mut target, plan).await?;
        let expected = sums[&plan.target.name];
        if copied != expected {
            return Err(MoveError::Failed(format!(
                "verification failed for {}: the source had {} rows (checksum {}), the target has {} (checksum {})",
                plan.target.name,
                expected.rows,
                expected.hex(),
                copied.rows,
                copied.hex()
            )));
        }
        tables.push(TableReport { table: plan.target.name.clone(), rows: copied.rows, checksum: copied.hex() });
    }
    target.close().await;
    Ok(Report { tables, counters, copy_time, verify_time: started.elapsed() })
}

type Sums = HashMap<String, TableSum>;

/// A self-reference to set after the copy: the row's key, the column's
/// index, and the value.
type Deferred = (Vec<(String, Value)>, usize, Value);

async fn copy_all(
    source: &mut Db, target: &mut Db, plans: &[Plan], progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<(Sums, Vec<(String, String, i64)>), MoveError> {
    let mut sums = HashMap::new();
    let mut counters = Vec::new();
    for plan in plans {
        let name = &plan.target.name;
        let total = source.count(name).await?;
        progress(Progress::Copying { table: name, done: 0, total });
        let target_cols = plan.target_columns();
        // Bound parameters per statement: SQLite allows 32 766, PostgreSQL 65 535.
        let max_params = match target {
            Db::Sqlite(_) => 32_000,
            Db::Postgres(_) => 60_000,
        };
        let batch_rows = (max_params / target_cols.len().max(1)).clamp(1, 2_000);
        let key_index: Vec<usize> = plan
            .target
            .primary_key
            .iter()
            .filter_map(|k| plan.columns.iter().position(|(_, tc, _)| &tc.name == k))
            .collect();
        let mut deferred: Vec<Deferred> = Vec::new();
        let mut sum = TableSum::default();
        let mut batch = Vec::with_capacity(batch_rows);
        let mut done = 0u64;
        let source_cols = plan.source_columns();
        let mut rows = source.rows(&plan.source, &source_cols);
        while let Some(row) = rows.next().await {
            let logical = plan.logical(row?)?;
            sum.add(&logical);
            let mut stored: Vec<Value> =
                logical.into_iter().zip(&target_cols).map(|(v, c)| v.into_stored(c.phys)).collect();
            for &i in &plan.deferred {
                if stored[i] != Value::Null {
                    let key = key_index.iter().map(|&k| (target_cols[k].name.clone(), stored[k].clone())).collect();
                    deferred.push((key, i, std::mem::replace(&mut stored[i], Value::Null)));
                }
            }
            batch.push(stored);
            if batch.len() == batch_rows {
                target.insert(&plan.target, &target_cols, std::mem::take(&mut batch)).await?;
                done += batch_rows as u64;
                progress(Progress::Copying { table: name, done, total });
            }
        }
        drop(rows);
        done += batch.len() as u64;
        target.insert(&plan.target, &target_cols, batch).await?;
        if !deferred.is_empty() && key_index.len() != plan.target.primary_key.len() {
            return Err(MoveError::Schema(format!("{name} refers to itself but has no primary key to set it by")));
        }
        for (key, i, value) in deferred {
            target.update_one(&plan.target, &key, &target_cols[i], value).await?;
        }
        progress(Progress::Copying { table: name, done, total });
        if let Some(column) = &plan.target.counter
            && let Some((sc, _, _)) = plan.columns.iter().find(|(_, tc, _)| &tc.name == column)
        {
            let high = source.counter_high_water(&plan.source, &sc.name).await?;
            target.set_counter(&plan.target, column, high).await?;
            counters.push((name.clone(), column.clone(), high));
        }
        sums.insert(name.clone(), sum);
    }
    for counter in SHARED_COUNTERS {
        if let Some(high) = carry_counter(source, target, plans, counter).await? {
            counters.push((counter.name.to_string(), String::new(), high));
        }
    }
    Ok((sums, counters))
}

/// Moves one `SHARED_COUNTERS` entry: the highest value the source handed
/// out (its counter, or a higher value found in use) becomes the floor of the
/// target's counter. Answers it, if the target keeps this counter.
async fn carry_counter(
    source: &mut Db, target: &mut Db, plans: &[Plan], counter: &SharedCounter,
) -> Result<Option<i64>, MoveError> {
    let (table, column) = counter.sqlite_next;
    let plan = plans.iter().find(|p| p.target.name == table);
    let source_has_column = plan.is_some_and(|p| p.source.column(column).is_some());
    let target_has_column = plan.is_some_and(|p| p.target.column(column).is_some());
    let mut high = match source {
        Db::Sqlite(_) if source_has_column => {
            source.scalar_i64(&format!("SELECT max({}) - 1 FROM {}", db::quote(column), db::quote(table))).await?
        }
        Db::Postgres(_) => source.sequence_high(counter.postgres_sequence).await?.unwrap_or(0),
        _ => 0,
    };
    for (t, c) in counter.used_in {
        if plans.iter().any(|p| p.source.name == *t && p.source.column(c).is_some()) {
            high = high.max(source.scalar_i64(&format!("SELECT max({}) FROM {}", db::quote(c), db::quote(t))).await?);
        }
    }
    match target {
        Db::Postgres(_) => {
            if target.sequence_high(counter.postgres_sequence).await?.is_none() {
                return Ok(None);
            }
            if high > 0 {
                target.scalar_i64(&format!("SELECT setval('{}', {high}, true)", counter.postgres_sequence)).await?;
            }
        }
        // Copied as is when the source has the column too.
        Db::Sqlite(_) if target_has_column && !source_has_column => {
            target
                .execute(&format!(
                    "UPDATE {t} SET {c} = max({c}, {next})",
                    t = db::quote(table),
                    c = db::quote(column),
                    next = high + 1
                ))
                .await?;
        }
        Db::Sqlite(_) if !target_has_column => return Ok(None),
        Db::Sqlite(_) => {}
    }
    Ok(Some(high))
}

/// The target's rows, read back, in the same checksum as the source's.
async fn verify_sum(target: &mut Db, plan: &Plan) -> Result<TableSum, MoveError> {
    let mut sum = TableSum::default();
    let cols = plan.target_columns();
    let mut rows = target.rows(&plan.target, &cols);
    while let Some(row) = rows.next().await {
        sum.add(&plan.logical(row?)?);
    }
    Ok(sum)
}

/// A consistent copy of the SQLite store at `from`, taken while it may be
/// serving: `VACUUM INTO` reads one snapshot (a read transaction, which in
/// WAL mode does not block the writer) and writes a compact, standalone
/// database that `pad serve --database-url sqlite://DEST` opens as is.
/// Answers the copy's size in bytes.
pub async fn backup_sqlite(from: &Path, dest: &Path) -> Result<u64, MoveError> {
    if dest.exists() {
        return Err(MoveError::Usage(format!("{} exists: back up to a new file", dest.display())));
    }
    let dest_text =
        dest.to_str().ok_or_else(|| MoveError::Usage(format!("{} is not a UTF-8 path", dest.display())))?.to_string();
    let url = DbUrl::Sqlite(from.to_path_buf());
    let mut db = Db::connect(&url, false).await?;
    if db.migration_versions().await?.is_none() {
        return Err(MoveError::Usage(format!("{} is not a pad store", url.display())));
    }
    let sql = format!("VACUUM INTO '{}'", dest_text.replace('\'', "''"));
    db.execute(&sql).await?;
    db.close().await;
    let mut copy = Db::connect(&DbUrl::Sqlite(dest.to_path_buf()), false).await?;
    let check = copy.quick_check().await;
    copy.close().await;
    check?;
    Ok(std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, columns: &[(&str, Phys, bool)]) -> Table {
        Table {
            name: name.into(),
            columns: columns
                .iter()
                .map(|(n, p, identity)| Column { name: (*n).into(), phys: *p, identity: *identity, generated: false })
                .collect(),
            order_by: "rowid".into(),
            primary_key: vec!["id".into()],
            counter: Some("id".into()),
            foreign_keys: vec![],
        }
    }

    #[test]
    fn columns_only_one_side_has_are_refused_unless_the_database_or_a_counter_rule_fills_them() {
        let sqlite = table("workspaces", &[("id", Phys::Int, false), ("created_at", Phys::Int, false)]);
        let pg = table("workspaces", &[("id", Phys::Int, true), ("created_at", Phys::Time, false)]);
        let plan = Plan::new(sqlite.clone(), pg.clone()).unwrap();
        assert_eq!(plan.columns.iter().map(|(_, _, p)| *p).collect::<Vec<_>>(), vec![Phys::Int, Phys::Time]);

        let mut with_next = sqlite.clone();
        with_next.columns.push(Column {
            name: "next_lease_id".into(),
            phys: Phys::Int,
            identity: false,
            generated: false,
        });
        assert_eq!(Plan::new(with_next.clone(), pg.clone()).unwrap().columns.len(), 2);
        assert_eq!(Plan::new(pg.clone(), with_next).unwrap().columns.len(), 2);

        let mut extra = sqlite.clone();
        extra.columns.push(Column { name: "mystery".into(), phys: Phys::Text, identity: false, generated: false });
        assert!(matches!(Plan::new(extra.clone(), pg.clone()), Err(MoveError::Schema(_))));
        assert!(matches!(Plan::new(pg.clone(), extra), Err(MoveError::Schema(_))));

        let mut position = pg.clone();
        position.columns.push(Column { name: "position".into(), phys: Phys::Int, identity: true, generated: false });
        assert_eq!(Plan::new(sqlite, position).unwrap().columns.len(), 2);
    }

    #[test]
    fn tables_come_after_the_tables_they_reference() {
        let mut items = table("items", &[("id", Phys::Int, false)]);
        items.foreign_keys = vec![("parent_id".into(), "items".into()), ("workspace_id".into(), "workspaces".into())];
        let workspaces = table("workspaces", &[("id", Phys::Int, false)]);
        let plans = vec![
            Plan::new(items.clone(), items.clone()).unwrap(),
            Plan::new(workspaces.clone(), workspaces.clone()).unwrap(),
        ];
        let order: Vec<String> = dependency_order(plans).unwrap().into_iter().map(|p| p.target.name).collect();
        assert_eq!(order, ["workspaces", "items"]);
        let mut a = table("a", &[("id", Phys::Int, false)]);
        a.foreign_keys = vec![("b_id".into(), "b".into())];
        let mut b = table("b", &[("id", Phys::Int, false)]);
        b.foreign_keys = vec![("a_id".into(), "a".into())];
        let cycle = vec![Plan::new(a.clone(), a).unwrap(), Plan::new(b.clone(), b).unwrap()];
        assert!(matches!(dependency_order(cycle), Err(MoveError::Schema(_))));
    }
}
