//! Who may do what in a workspace. The server asks [`permits`] on every
//! route; the table lives here so it is read in one place.

use crate::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read items, comments, history, members, events.
    Read,
    /// Create, update, delete, restore and comment on items.
    Write,
    /// Claim, renew and release leases.
    Lease,
    /// Break another worker's live lease (L7).
    BreakLease,
    /// Members, kinds, and other members' tokens.
    Administer,
}

pub fn permits(role: Role, action: Action) -> bool {
    match action {
        Action::Read => true,
        Action::Write | Action::Lease => matches!(role, Role::Owner | Role::Editor),
        Action::BreakLease | Action::Administer => role == Role::Owner,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewer_reads_but_cannot_claim_or_edit() {
        assert!(permits(Role::Viewer, Action::Read));
        assert!(!permits(Role::Viewer, Action::Lease));
        assert!(!permits(Role::Viewer, Action::Write));
        assert!(permits(Role::Editor, Action::Lease));
        assert!(!permits(Role::Editor, Action::BreakLease));
        assert!(permits(Role::Owner, Action::BreakLease));
    }
}
