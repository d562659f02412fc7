//! The SQLite store's integration tests, in one test binary (one module per
//! area, linked once): the shared conformance suite, the WAL bound, upgrades.

mod checkpoint;
mod conformance;
mod import;
mod upgrade;
