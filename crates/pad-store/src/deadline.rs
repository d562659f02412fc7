//! A request's deadline, as a write that must finish by it sees it
//! (docs/api.md, "Import"; "Limits": a whole request). The server answers
//! `503 unavailable` once the deadline passes; a write that is still running
//! then must not commit, or that answer would be a lie. So the answer and the
//! commit take turns on one flag: whichever comes first wins. A write that
//! claimed its commit before the deadline is waited for and answered as
//! usual; one that comes to commit after the deadline answered rolls back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

const RUNNING: u8 = 0;
const COMMITTING: u8 = 1;
const EXPIRED: u8 = 2;

/// When a request must be answered by, shared between its handler and
/// whoever answers it when that time passes. Clones share the flag.
#[derive(Debug, Clone)]
pub struct Deadline {
    at: Option<Instant>,
    state: Arc<AtomicU8>,
}

impl Deadline {
    /// A deadline at `at`.
    pub fn at(at: Instant) -> Self {
        Deadline { at: Some(at), state: Arc::new(AtomicU8::new(RUNNING)) }
    }

    /// A deadline `d` from now.
    pub fn after(d: Duration) -> Self {
        Self::at(Instant::now() + d)
    }

    /// No deadline: for callers that are not answering a request (tools, tests).
    pub fn none() -> Self {
        Deadline { at: None, state: Arc::new(AtomicU8::new(RUNNING)) }
    }

    /// True once the time has come, or the request was answered as late
    /// ([`expire`](Self::expire)). A write checks this between its steps.
    pub fn passed(&self) -> bool {
        match self.state.load(Ordering::Acquire) {
            EXPIRED => true,
            COMMITTING => false,
            _ => self.at.is_some_and(|at| Instant::now() >= at),
        }
    }

    /// Claims the commit, right before it: true when the deadline has not
    /// passed and the request was not answered as late. From then on
    /// [`expire`](Self::expire) answers false: the answer waits for the commit.
    pub fn claim_commit(&self) -> bool {
        if self.at.is_some_and(|at| Instant::now() >= at) {
            self.expire();
        }
        matches!(
            self.state.compare_exchange(RUNNING, COMMITTING, Ordering::AcqRel, Ordering::Acquire),
            Ok(_) | Err(COMMITTING)
        )
    }

    /// The answering side, once the time has come: true when it may answer
    /// that the request was not completed (nothing will commit after this);
    /// false when a commit was claimed first, and the handler's own answer
    /// must be waited for.
    pub fn expire(&self) -> bool {
        matches!(
            self.state.compare_exchange(RUNNING, EXPIRED, Ordering::AcqRel, Ordering::Acquire),
            Ok(_) | Err(EXPIRED)
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Deadline;

    #[test]
    fn the_answer_and_the_commit_exclude_each_other() {
        let d = Deadline::after(Duration::from_secs(3600));
        assert!(!d.passed());
        assert!(d.claim_commit());
        assert!(!d.expire(), "a claimed commit is waited for");
        assert!(!d.passed());

        let d = Deadline::after(Duration::from_secs(3600));
        assert!(d.expire());
        assert!(d.passed());
        assert!(!d.claim_commit(), "no commit after a late answer");

        let past = Deadline::at(Instant::now());
        assert!(past.passed());
        assert!(!past.claim_commit());
        assert!(past.expire());

        let none = Deadline::none();
        assert!(!none.passed() && none.claim_commit());
    }
}
