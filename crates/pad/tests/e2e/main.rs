//! pad end to end, in one test binary: a real `pad serve` process driven by the
//! real binary and by clients this project did not write (`common/server.rs`).
//! One module per area; each was once its own test binary, relinking
//! everything over the same `common/`.

mod common;

mod agents;
mod chaos;
mod crash;
mod daily;
mod db_faults;
mod dbmove;
mod drain;
mod drain_jobs;
mod events;
mod fencing;
mod first_start;
mod full_disk;
mod import_kill;
mod logs;
mod mcp;
mod metrics;
mod newcomer;
mod pg_events;
mod pg_instances;
mod schemathesis;
mod setup;
mod supervise;
mod tour;
mod transfer;
mod ui;
mod waits;
mod webhooks;
mod wit;
