//! The PostgreSQL store's integration tests, in one test binary (one module
//! per area, linked once): the shared conformance suite and many instances
//! on one database.

mod common;

mod conformance;
mod contention;
mod group;
mod held;
mod horizon;
mod instances;
mod plans;
mod ready;
mod tls;
mod upgrade;
mod vacuum;
