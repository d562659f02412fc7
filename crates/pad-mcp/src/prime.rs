//! The session-start brief for an agent (`pad prime`, the `pad_prime` tool
//! and prompt): who it is, the leases it holds, the ready work, what needs a
//! person, and the few tools it needs. Kept small on purpose: an agent reads
//! it into its context at the start of every session (docs/agents.md).

use chrono::{DateTime, Utc};
use pad_client::ClientError;
use pad_core::api::{FrontierQuery, ListQuery};
use pad_core::{Item, NEEDS_HUMAN};

use crate::PadApi;
use serde::Serialize;

/// How many ready items the brief shows: enough to choose, few enough to stay short.
pub const READY_SHOWN: u32 = 5;
/// How many of the caller's leases it lists; the rest are counted.
pub const LEASES_SHOWN: usize = 10;
/// The page size used to count leases and quarantined items; counts beyond
/// it read as "at least" (`…_more`).
const COUNT_PAGE: u32 = 500;

/// The tools (and the matching CLI commands) an agent needs, in the order it
/// uses them.
pub const ESSENTIALS: [(&str, &str, &str); 5] = [
    ("pad_claim_next", "pad item claim-next --autonomous", "take the best ready item (autonomous: true)"),
    ("pad_item_renew", "pad item renew REF --epoch N", "heartbeat: every third of the TTL, with your epoch"),
    ("pad_item_complete", "pad item complete REF --epoch N", "finish: status done and the lease ended, fenced"),
    ("pad_item_fail", "pad item fail REF --epoch N --note TEXT", "give up: ends the lease, counts a failure"),
    ("pad_item_comment", "pad item comment REF TEXT", "report progress, findings, questions"),
];

#[derive(Debug, Clone, Serialize)]
pub struct Prime {
    pub user: String,
    /// The holder label this session's claims use when they name none.
    pub holder: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub workspace: String,
    pub server: String,
    pub now: DateTime<Utc>,
    /// Live leases held under `holder`.
    pub leases: Vec<HeldLease>,
    /// The top of the autonomous frontier.
    pub ready: Vec<ReadyItem>,
    /// Open items labelled needs-human: left for a person.
    pub quarantined: usize,
    /// Open items with failed attempts that are not (yet) quarantined.
    pub failing: usize,
    /// More open items than were counted: the counts are lower bounds.
    pub counts_partial: bool,
    pub tools: Vec<Essential>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeldLease {
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub title: String,
    pub epoch: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub expires_at: DateTime<Utc>,
    pub expires_in_seconds: i64,
    /// The progress note written under this lease, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReadyItem {
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub title: String,
    pub priority: String,
    pub kind: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Essential {
    pub tool: &'static str,
    pub command: &'static str,
    pub what: &'static str,
}

/// Who is asking: the holder label and session its claims default to.
#[derive(Debug, Clone)]
pub struct PrimeFor<'a> {
    pub workspace: &'a str,
    pub holder: Option<&'a str>,
    pub session_id: Option<&'a str>,
}

/// Reads what the brief needs: four GETs, none of which changes anything.
pub async fn gather(client: &dyn PadApi, who: PrimeFor<'_>) -> Result<Prime, ClientError> {
    let me = client.me().await?;
    let holder = who.holder.map_or_else(|| me.email.clone(), str::to_string);
    let leased = ListQuery { leased: Some(true), limit: Some(COUNT_PAGE), ..Default::default() };
    let leased = client.list_items(who.workspace, &leased).await?;
    let ready = FrontierQuery { autonomous: Some(true), limit: Some(READY_SHOWN), ..Default::default() };
    let ready = client.frontier(who.workspace, &ready).await?;
    let open = ListQuery { status: Some("open,in-progress".into()), limit: Some(COUNT_PAGE), ..Default::default() };
    let open = client.list_items(who.workspace, &open).await?;
    let now = Utc::now();
    Ok(Prime {
        user: me.email,
        leases: held_by(&leased.items, &holder, now),
        holder,
        session_id: who.session_id.map(str::to_string),
        workspace: who.workspace.to_string(),
        server: client.server(),
        now,
        ready: ready.items.iter().map(ready_item).collect(),
        quarantined: open.items.iter().filter(|i| needs_human(i)).count(),
        failing: failing(&open.items),
        counts_partial: open.next_cursor.is_some(),
        tools: ESSENTIALS.iter().map(|&(tool, command, what)| Essential { tool, command, what }).collect(),
    })
}

fn needs_human(item: &Item) -> bool {
    item.labels.iter().any(|l| l == NEEDS_HUMAN)
}

/// Items whose last outcome was a failure, so they wait to be retried; one
/// that succeeded since keeps its failure count but is not failing (docs/leases.md
/// L14). Those needing a human are counted apart.
fn failing(items: &[Item]) -> usize {
    items.iter().filter(|i| i.failing() && !needs_human(i)).count()
}

fn held_by(items: &[Item], holder: &str, now: DateTime<Utc>) -> Vec<HeldLease> {
    items
        .iter()
        .filter_map(|item| {
            let lease = item.lease.as_ref().filter(|l| l.holder == holder && l.is_live(now))?;
            Some(HeldLease {
                item_ref: item.item_ref.to_string(),
                title: item.title.clone(),
                epoch: lease.epoch,
                session_id: lease.session_id.clone(),
                expires_at: lease.expires_at,
                expires_in_seconds: lease.expires_in_seconds(now),
                note: item.lease_note.clone(),
            })
        })
        .collect()
}

fn ready_item(item: &Item) -> ReadyItem {
    ReadyItem {
        item_ref: item.item_ref.to_string(),
        title: item.title.clone(),
        priority: item.priority.as_str().to_string(),
        kind: item.kind.clone(),
    }
}

/// `14m`, `1h30m`, `45s`: time left, rounded down.
fn in_words(seconds: i64) -> String {
    let s = seconds.max(0);
    match (s / 3600, (s % 3600) / 60) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

impl Prime {
    /// The brief as markdown, at most about 30 lines with the default limits.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line("# pad: your work session".into());
        line(String::new());
        let session = self.session_id.as_deref().map(|s| format!(", session `{s}`")).unwrap_or_default();
        line(format!(
            "You are `{}` (holder `{}`{session}) in workspace `{}` on {}.",
            self.user, self.holder, self.workspace, self.server
        ));
        line(String::new());
        if self.leases.is_empty() {
            line("Your live leases: none.".into());
        } else {
            line("Your live leases (renew before a third of the TTL is left; stop at once on lease_lost):".into());
            for l in self.leases.iter().take(LEASES_SHOWN) {
                line(format!(
                    "- {} \"{}\": epoch {}, expires in {} ({})",
                    l.item_ref,
                    l.title,
                    l.epoch,
                    in_words(l.expires_in_seconds),
                    l.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ));
                if let Some(note) = &l.note {
                    line(format!("  note: {note}"));
                }
            }
            if self.leases.len() > LEASES_SHOWN {
                line(format!("- and {} more (pad_item_list with leased: true)", self.leases.len() - LEASES_SHOWN));
            }
        }
        line(String::new());
        if self.ready.is_empty() {
            line("Ready for you: nothing (the autonomous frontier is empty).".into());
        } else {
            line("Ready for you (autonomous frontier, best first; claim with pad_claim_next):".into());
            for i in &self.ready {
                line(format!("- {} [{}, {}] {}", i.item_ref, i.priority, i.kind, i.title));
            }
        }
        let more = if self.counts_partial { "+" } else { "" };
        line(format!(
            "Needs a human (labelled {NEEDS_HUMAN}, never claim these): {}{more}. Failing (retried later): {}{more}.",
            self.quarantined, self.failing
        ));
        line(String::new());
        line("The tools you need (CLI equivalent):".into());
        for t in &self.tools {
            line(format!("- `{}` (`{}`): {}", t.tool, t.command, t.what));
        }
        line(String::new());
        line(
            "Never work on an item without a live lease. lease_held: someone else has it, take other work. \
              lease_lost: your lease expired or was broken, stop and do not write to that item."
                .into(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prime() -> Prime {
        let now = Utc::now();
        Prime {
            user: "owner@localhost".into(),
            holder: "claude@box-1a2b3c".into(),
            session_id: Some("1a2b3c4d".into()),
            workspace: "default".into(),
            server: "http://127.0.0.1:7777/".into(),
            now,
            leases: vec![HeldLease {
                item_ref: "TASK-1".into(),
                title: "Port the parser".into(),
                epoch: 2,
                session_id: None,
                expires_at: now,
                expires_in_seconds: 840,
                note: Some("parser ported, tests next".into()),
            }],
            ready: (1..=5)
                .map(|n| ReadyItem {
                    item_ref: format!("TASK-{n}"),
                    title: "t".into(),
                    priority: "high".into(),
                    kind: "task".into(),
                })
                .collect(),
            quarantined: 3,
            failing: 2,
            counts_partial: false,
            tools: ESSENTIALS.iter().map(|&(tool, command, what)| Essential { tool, command, what }).collect(),
        }
    }

    fn item(failures: i64, last_failure_at: Option<&str>, last_success_at: Option<&str>, labels: &[&str]) -> Item {
        serde_json::from_value(serde_json::json!({
            "ref": "TASK-1", "kind": "task", "title": "t", "body": "", "status": "open", "priority": "medium",
            "labels": labels, "parent": null, "blocked_by": [], "assignee": null, "created_by": "owner@localhost",
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "comments_count": 0,
            "failures": failures, "last_failure_at": last_failure_at, "last_success_at": last_success_at,
        }))
        .unwrap()
    }

    /// "Failing" counts items whose last outcome was a failure, as
    /// `item show` reads it, not every item that ever failed.
    #[test]
    fn failing_counts_only_items_whose_last_outcome_failed() {
        let (early, late) = (Some("2026-01-01T00:01:00Z"), Some("2026-01-01T00:02:00Z"));
        assert_eq!(failing(&[item(2, early, None, &[])]), 1, "failed, never succeeded");
        assert_eq!(failing(&[item(2, early, late, &[])]), 0, "succeeded after its failures");
        assert_eq!(failing(&[item(1, late, early, &[])]), 1, "failed after a success");
        assert_eq!(failing(&[item(0, None, late, &[])]), 0, "never failed");
        assert_eq!(failing(&[item(3, late, None, &[NEEDS_HUMAN])]), 0, "counted as needing a human");
    }

    #[test]
    fn brief_names_the_lease_and_stays_short() {
        let mut many = prime();
        many.leases = std::iter::repeat_n(many.leases[0].clone(), 40).collect();
        assert!(many.to_markdown().lines().count() < 60);
        assert!(many.to_markdown().contains("- and 30 more"));
        let text = prime().to_markdown();
        assert!(text.contains("- TASK-1 \"Port the parser\": epoch 2, expires in 14m"), "{text}");
        assert!(text.contains("  note: parser ported, tests next\n"), "{text}");
        assert!(text.contains("holder `claude@box-1a2b3c`"), "{text}");
        assert!(text.contains("never claim these): 3. Failing (retried later): 2."), "{text}");
        assert_eq!(text.matches("- `pad_").count(), 5);
        assert!(text.lines().count() < 60, "{} lines", text.lines().count());
    }
}
