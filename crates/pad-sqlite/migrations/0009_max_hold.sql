-- L19: a cap on a lease's age (docs/leases.md, "L19"). The live lease's cap
-- (acquired_at plus its max hold, microseconds; NULL: none) and the
-- workspace's max hold in seconds (NULL: no cap).
ALTER TABLE items ADD COLUMN lease_hold_until INTEGER;
ALTER TABLE workspaces ADD COLUMN max_hold_seconds INTEGER;
-- L14: what happened last (docs/leases.md, "News that is true"): when the
-- item last succeeded (a complete, or a release by a holder that succeeded)
-- and last failed, microseconds.
ALTER TABLE items ADD COLUMN last_success_at INTEGER;
ALTER TABLE items ADD COLUMN last_failure_at INTEGER;
-- Who minted each token (docs/api.md, "Tokens"): removing a member revokes
-- the tokens they minted for others too. NULL for tokens minted before.
ALTER TABLE tokens ADD COLUMN minted_by INTEGER REFERENCES users(id);
CREATE INDEX tokens_by_minter ON tokens (minted_by) WHERE minted_by IS NOT NULL;
