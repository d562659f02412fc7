//! pad-server's HTTP API against a real server on loopback (`common/`), in
//! one test binary: one module per area. Each was once its own binary,
//! linking the whole server again; one binary builds and links once.

mod common;

mod access;
mod api;
mod auth_cache;
mod authz;
mod batch;
mod bodies;
mod events;
mod hostile;
mod import;
mod limits;
mod mcp;
mod metrics;
mod pages;
mod paths;
mod query;
mod render;
mod webhook_account_cap;
mod webhook_isolation;
mod webhook_targets;
