-- Event ids are no longer drawn from a sequence under one database-wide
-- lock. The store computes each id from the writing transaction:
--   id = pg_current_xact_id() * 65536 + (the event's index in its transaction)
-- and readers serve only ids below the oldest transaction of this database
-- that may still write events, so ids still become visible in increasing
-- order while writers run in parallel (docs/api.md, "Event order on
-- PostgreSQL"). Existing events keep their ids: there are fewer of them than
-- 65536 per transaction id ever used, so they all sort before the new ones.
ALTER TABLE events ALTER COLUMN id DROP IDENTITY;
