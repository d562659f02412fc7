-- L7: a broken lease's reason and the owner who broke it, kept with the item
-- next to the id of the lease they describe (docs/leases.md, "Told why").
ALTER TABLE items
    ADD COLUMN broken_lease_id bigint,
    ADD COLUMN broken_reason   text,
    ADD COLUMN broken_by       text;
