//! The work-item-tracker id of a pad item: `pad:<workspace>/<PREFIX>#<n>`
//! for ref `PREFIX-n` (docs/work-item-tracker.md, "Ids").

use std::fmt;
use std::str::FromStr;

use pad_core::ItemRef;

pub const PROVIDER: &str = "pad";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitId {
    pub workspace: String,
    pub item_ref: ItemRef,
}

impl WitId {
    pub fn new(workspace: &str, item_ref: ItemRef) -> Self {
        WitId { workspace: workspace.to_string(), item_ref }
    }
}

impl fmt::Display for WitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PROVIDER}:{}/{}#{}", self.workspace, self.item_ref.prefix, self.item_ref.number)
    }
}

impl FromStr for WitId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a pad item id (like {PROVIDER}:default/TASK#5)");
        let rest = s.strip_prefix(PROVIDER).and_then(|r| r.strip_prefix(':')).ok_or_else(bad)?;
        let (repo, number) = rest.rsplit_once('#').ok_or_else(bad)?;
        let (workspace, prefix) = parse_repo(repo).ok_or_else(bad)?;
        let item_ref = format!("{prefix}-{number}").parse::<ItemRef>().map_err(|_| bad())?;
        Ok(WitId { workspace, item_ref })
    }
}

/// `<workspace>/<PREFIX>`: the contract's `<owner>/<repo>`. The prefix is
/// upper-cased, as refs are.
pub fn parse_repo(repo: &str) -> Option<(String, String)> {
    let (workspace, prefix) = repo.split_once('/')?;
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (plain(workspace) && plain(prefix)).then(|| (workspace.to_string(), prefix.to_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_normalises_the_prefix() {
        let id: WitId = "pad:team/task#12".parse().unwrap();
        assert_eq!((id.workspace.as_str(), id.item_ref.to_string().as_str()), ("team", "TASK-12"));
        assert_eq!(id.to_string(), "pad:team/TASK#12");
    }

    #[test]
    fn refuses_other_shapes() {
        for bad in [
            "not-an-id",
            "github:o/r#1",
            "pad:team#1",
            "pad:/TASK#1",
            "pad:team/TASK#",
            "pad:team/TASK#01",
            "pad:a/b/c#1",
        ] {
            assert!(bad.parse::<WitId>().is_err(), "{bad}");
        }
    }
}
