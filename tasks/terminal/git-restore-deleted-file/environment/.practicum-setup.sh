#!/bin/bash
# Builds a history in which a migration file is edited twice and then deleted. Identity and
# dates are fixed, so the commit ids are the same on every run.
set -euo pipefail
export GIT_AUTHOR_NAME="Ria DBA" GIT_AUTHOR_EMAIL=ria@example.com
export GIT_COMMITTER_NAME="Ria DBA" GIT_COMMITTER_EMAIL=ria@example.com
n=0
commit() {
    n=$((n + 1))
    export GIT_AUTHOR_DATE="2024-05-0${n}T08:00:00+00:00" GIT_COMMITTER_DATE="2024-05-0${n}T08:00:00+00:00"
    git add -A
    git commit -q -m "$*"
}
git init -q -b main
git config user.name "Ria DBA"
git config user.email ria@example.com
git config commit.gpgsign false

mkdir -p migrations
cat > migrations/0001_create_users.sql <<'SQL'
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);
SQL
cat > migrations/0002_create_orders.sql <<'SQL'
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), total_cents INTEGER);
SQL
cat > migrations/0003_add_index.sql <<'SQL'
CREATE INDEX orders_user ON orders(user_id);
SQL
printf 'Apply migrations in order: sqlite3 app.db < migrations/NNNN_*.sql\n' > README.md
commit "Initial schema"

cat > migrations/0003_add_index.sql <<'SQL'
-- speeds up the per-user order history page
CREATE INDEX IF NOT EXISTS orders_user ON orders(user_id);
SQL
commit "Make index creation idempotent"

cat > migrations/0004_add_created_at.sql <<'SQL'
ALTER TABLE orders ADD COLUMN created_at TEXT;
SQL
commit "Add created_at to orders"

cat > migrations/0003_add_index.sql <<'SQL'
-- speeds up the per-user order history page
CREATE INDEX IF NOT EXISTS orders_user ON orders(user_id);
CREATE INDEX IF NOT EXISTS orders_created ON orders(created_at);
SQL
commit "Index orders by creation time"

git rm -q migrations/0003_add_index.sql
commit "Remove obsolete migration"

printf '\nSee CHANGELOG.md for schema history.\n' >> README.md
printf '# Changelog\n\n- 0004: orders.created_at\n' > CHANGELOG.md
commit "Add changelog"
