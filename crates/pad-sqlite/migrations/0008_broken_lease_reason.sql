-- L7: a broken lease's reason and the owner who broke it, kept with the item
-- next to the id of the lease they describe (docs/leases.md, "Told why").
ALTER TABLE items ADD COLUMN broken_lease_id INTEGER;
ALTER TABLE items ADD COLUMN broken_reason TEXT;
ALTER TABLE items ADD COLUMN broken_by TEXT;
