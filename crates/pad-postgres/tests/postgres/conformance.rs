//! The shared conformance suite against the PostgreSQL store, each test on a
//! fresh database. Skipped (loudly) unless `PAD_TEST_DATABASE_URL` is set.

use crate::common;

use std::sync::Arc;

use pad_postgres::PgStore;
use pad_test_support::conformance::TestStore;

async fn fresh() -> Option<TestStore> {
    let db = common::ScratchDb::create().await?;
    // Small pools: the tests of this binary run in parallel on one server.
    let store = PgStore::open_with(&db.url, 8).await.expect("open postgres");
    // The clock is the database's (`clock_timestamp()` in every lease
    // statement): expiry tests sleep here.
    Some(TestStore { store: Arc::new(store), guard: Box::new(db), clock: None })
}

pad_test_support::conformance_suite!(fresh());
