#!/usr/bin/env bash
# Times `pad db migrate` on a SQLite store of N items (default 100 000), into
# a fresh PostgreSQL database and back (docs/operations.md, "Figures").
# Usage: scripts/migrate-figures.sh PAD_BINARY POSTGRES_ADMIN_URL [N]
set -euo pipefail
pad=$(realpath "$1"); admin=$2; n=${3:-100000}
dir=$(mktemp -d); trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
export PAD_HOME=$dir/home
db="pad_figures_$$"

# A store made by pad serve (schema and bootstrap), then filled in bulk.
"$pad" serve --listen 127.0.0.1:0 2>"$dir/serve.log" & server=$!
until grep -q 'listening on' "$dir/serve.log"; do sleep 0.2; done
kill $server; wait $server 2>/dev/null || true
sqlite3 "$PAD_HOME/pad.db" <<SQL
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $n)
INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, labels,
                   created_by, created_at, updated_at)
SELECT 1, 'TASK', i, 'task', 'item ' || i, 'the body of item ' || i || ', a line of text',
       CASE i % 4 WHEN 0 THEN 'done' ELSE 'open' END, i % 4, '["bulk","l' || (i % 10) || '"]',
       1, 1764590400000000 + i * 1000, 1764590400000000 + i * 1000
FROM n;
UPDATE kinds SET next_number = $n + 1 WHERE workspace_id = 1 AND prefix = 'TASK';
UPDATE items SET parent_id = id - 1 WHERE id % 10 = 0;
INSERT INTO item_blockers (item_id, blocker_id) SELECT id, id - 1 FROM items WHERE id % 10 = 5;
INSERT INTO item_versions (item_id, version, actor_id, at, changes)
SELECT id, 1, 1, created_at, '{"title":{"from":null,"to":"' || title || '"}}' FROM items;
INSERT INTO comments (item_id, author_id, body, created_at)
SELECT id, 1, 'a comment on ' || id, created_at + 1 FROM items WHERE id % 5 = 0;
INSERT INTO events (workspace_id, type, item_ref, actor_id, at, data)
SELECT 1, 'item.created', 'TASK-' || number, 1, created_at, '{"title":"' || title || '"}' FROM items;
COMMIT;
SQL

psql "$admin" -qc "CREATE DATABASE $db"
target="${admin%/*}/$db"
echo "== SQLite → PostgreSQL, $n items"
/usr/bin/time -f "wall %es, max RSS %MkB" "$pad" db migrate --from "sqlite://$PAD_HOME/pad.db" --to "$target"
echo "== PostgreSQL → SQLite"
/usr/bin/time -f "wall %es, max RSS %MkB" "$pad" db migrate --from "$target" --to "sqlite://$dir/back.db"
psql "$admin" -qc "DROP DATABASE $db WITH (FORCE)"
