//! Helpers shared by pad's end-to-end tests. Each test binary includes this
//! with `mod common;`; not every binary uses every helper.
#![allow(dead_code)]

pub mod cli;
pub mod history;
pub mod load;
pub mod pg;
pub mod recorder;
pub mod server;
