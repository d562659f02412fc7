//! The shared conformance suite against the SQLite store.

use std::sync::Arc;

use pad_sqlite::SqliteStore;
use pad_store::conformance::TestStore;

async fn fresh() -> Option<TestStore> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("pad.db")).await.expect("open sqlite");
    Some(TestStore { store: Arc::new(store), guard: Box::new(dir) })
}

pad_store::conformance_suite!(fresh());
