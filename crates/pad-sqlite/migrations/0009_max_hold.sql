-- L19: a cap on a lease's age (docs/leases.md, "L19"). The live lease's cap
-- (acquired_at plus its max hold, microseconds; NULL: none) and the
-- workspace's max hold in seconds (NULL: no cap).
ALTER TABLE items ADD COLUMN lease_hold_until INTEGER;
ALTER TABLE workspaces ADD COLUMN max_hold_seconds INTEGER;
