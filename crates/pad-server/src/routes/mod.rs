//! Route handlers: parse, call the store, map the error. Nothing else.

pub mod events;
pub mod import;
pub mod items;
pub mod leases;
pub mod render;
pub mod webhooks;
pub mod workspaces;
