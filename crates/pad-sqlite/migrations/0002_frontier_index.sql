-- Claim-next and the frontier read ready items in L11 order. Without this
-- index every claim-next scanned and sorted all of a workspace's items
-- (1.8 s at 1 000 000 items); with it the query walks the index from the top
-- and stops at the first ready rows. See docs/benchmarks.md.
CREATE INDEX items_frontier ON items (workspace_id, priority DESC, created_at, id)
    WHERE deleted_at IS NULL AND status = 'open';
