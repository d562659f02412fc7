//! What the backends' test suites share, kept out of the crates they test:
//! the [`conformance`] suite every `Store` must pass, and the [`TestClock`]
//! that lets it move a store's clock instead of sleeping, and the scratch
//! PostgreSQL databases of every crate's tests ([`pg`]). Backends take this
//! crate as a dev-dependency only, so no release build carries it.

mod clock;
pub mod conformance;
pub mod pg;

pub use clock::TestClock;
