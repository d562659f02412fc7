-- The rows every writer of a workspace shares are no longer locked by each
-- write (docs/operations.md, "References PostgreSQL does not check").
-- PostgreSQL checks a foreign key by locking the referenced row FOR KEY
-- SHARE. Every claim, complete and event referenced the workspace's row and
-- the acting user's row, so concurrent writers of one workspace took shared
-- locks on the same two rows: each lock a WAL record, concurrent ones a
-- multixact. pad never deletes a workspace, a user or an item (items are
-- soft-deleted), and the store writes only ids it has just read, so these
-- references cannot dangle; SQLite, which checks them without locking a
-- row, keeps them (its 0013 is empty on purpose).
ALTER TABLE items DROP CONSTRAINT items_workspace_id_fkey;
ALTER TABLE items DROP CONSTRAINT items_created_by_fkey;
ALTER TABLE items DROP CONSTRAINT items_lease_user_id_fkey;
ALTER TABLE item_versions DROP CONSTRAINT item_versions_actor_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_workspace_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_actor_id_fkey;
-- Every claim and complete also wrote an entry here. Lookups by workspace
-- and expiry use `items_leased_by_expiry` (recorded leases only, a few per
-- worker), filtered by workspace.
DROP INDEX items_by_lease_expiry;
