-- L19: a cap on a lease's age (docs/leases.md, "L19"). The live lease's cap
-- (acquired_at plus its max hold; NULL: none) and the workspace's max hold
-- in seconds (NULL: no cap).
ALTER TABLE items ADD COLUMN lease_hold_until timestamptz;
ALTER TABLE workspaces ADD COLUMN max_hold_seconds integer;
-- L14: what happened last (docs/leases.md, "News that is true"): when the
-- item last succeeded (a complete, or a release by a holder that succeeded)
-- and last failed.
ALTER TABLE items ADD COLUMN last_success_at timestamptz;
ALTER TABLE items ADD COLUMN last_failure_at timestamptz;
-- Who minted each token (docs/api.md, "Tokens"): removing a member revokes
-- the tokens they minted for others too. NULL for tokens minted before.
ALTER TABLE tokens ADD COLUMN minted_by bigint REFERENCES users(id);
CREATE INDEX tokens_by_minter ON tokens (minted_by) WHERE minted_by IS NOT NULL;
