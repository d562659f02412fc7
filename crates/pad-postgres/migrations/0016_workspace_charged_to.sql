-- The account each workspace's creation was charged to (docs/webhooks.md,
-- "Isolation"; docs/api.md, "Limits"): the account the creating request's
-- token is charged to, fixed at creation, whoever the members are later.
-- Its webhook deliveries count against that account's cap. Same meaning as
-- SQLite's 0016.
--
-- Workspaces from before were not recorded with it. They are charged to
-- their first-added member, the account pad read as theirs until now: the
-- creator while it remains a member, else the member added after it (a
-- creator that left is not recorded anywhere). A workspace without members
-- stays NULL, and counts as an account of its own.
ALTER TABLE workspaces ADD COLUMN charged_to bigint REFERENCES users(id);
UPDATE workspaces SET charged_to = (
    SELECT m.user_id FROM members m WHERE m.workspace_id = workspaces.id
    ORDER BY m.added_at, m.user_id LIMIT 1);
