//! The shared conformance suite against the SQLite store.

use std::sync::Arc;

use pad_sqlite::SqliteStore;
use pad_test_support::TestClock;
use pad_test_support::conformance::TestStore;

async fn fresh() -> Option<TestStore> {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(TestClock::default());
    let store = SqliteStore::open_with_clock(&dir.path().join("pad.db"), clock.clone()).await.expect("open sqlite");
    Some(TestStore { store: Arc::new(store), guard: Box::new(dir), clock: Some(clock) })
}

pad_test_support::conformance_suite!(fresh());
