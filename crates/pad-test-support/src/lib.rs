//! What the backends' test suites share, kept out of the crates they test:
//! the [`conformance`] suite every `Store` must pass, and the [`TestClock`]
//! that lets it move a store's clock instead of sleeping. Backends take this
//! crate as a dev-dependency only, so no release build carries it.

mod clock;
pub mod conformance;

pub use clock::TestClock;
