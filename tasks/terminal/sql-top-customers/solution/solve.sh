#!/bin/bash
set -euo pipefail
cd /app
mkdir -p queries
cat > queries/top_customers.sql <<'SQL'
-- Top five customers by spending on paid orders of 2024.
SELECT c.name AS name,
       COUNT(DISTINCT o.id) AS orders,
       ROUND(SUM(i.quantity * i.unit_price_cents) / 100.0, 2) AS spent
FROM customers AS c
JOIN orders AS o ON o.customer_id = c.id
JOIN order_items AS i ON i.order_id = o.id
WHERE o.status = 'paid'
  AND o.created_at >= '2024-01-01' AND o.created_at < '2025-01-01'
GROUP BY c.id
ORDER BY spent DESC, name ASC
LIMIT 5;
SQL
python3 -c 'import sqlite3; print(sqlite3.connect("shop.db").execute(open("queries/top_customers.sql").read()).fetchall())'
