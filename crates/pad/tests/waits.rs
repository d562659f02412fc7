//! Waiting for work through the real binary: `pad item claim-next --wait`.
//! Its own test binary over the end-to-end tests' helpers (`e2e/common/`).

#[path = "e2e/common/mod.rs"]
// Not every helper is used here (the e2e binary uses the rest).
#[allow(unused_imports)]
mod common;

use common::cli::{code, create, show, stderr, stdout};
use common::server::TestServer;
use serde_json::Value;

/// `--wait` is bounded to 30 s, so a bare number can only mean seconds:
/// it is read so, unlike `--ttl`'s; past the bound it is still refused.
#[test]
fn claim_next_wait_takes_a_bare_number_of_seconds() {
    let s = TestServer::start();
    let (a, b) = (create(&s, "first"), create(&s, "second"));
    for bad in ["31", "-1", "99999999999999999999999", "5x"] {
        let out = s.pad_output(["item", "claim-next", "--wait", bad]);
        assert_eq!(code(&out), 2, "--wait {bad}: {}", stderr(&out));
        if bad == "31" {
            assert!(stderr(&out).contains("at most 30s"), "{}", stderr(&out));
        }
    }
    assert_eq!(show(&s, &a)["lease"], Value::Null, "a refused flag claims nothing");
    for (wait, expect) in [("5", &a), ("0", &b)] {
        let out = s.pad_output(["item", "claim-next", "--holder", "w", "--wait", wait]);
        assert_eq!(code(&out), 0, "--wait {wait}: {}", stderr(&out));
        assert!(stdout(&out).starts_with(&format!("Claimed {expect}: w")), "--wait {wait}: {}", stdout(&out));
    }
}
