#!/bin/bash
set -euo pipefail
cd /app
cat > /tmp/q.sql <<'SQL'
.headers on
.mode csv
WITH item_rev AS (SELECT order_id, SUM(quantity * unit_price) AS rev FROM order_items GROUP BY order_id),
counted AS (
  SELECT o.id, o.customer_id, substr(o.created_at, 1, 7) AS month, COALESCE(ir.rev, 0) AS rev
  FROM orders o LEFT JOIN item_rev ir ON ir.order_id = o.id
  WHERE o.status = 'completed' AND o.created_at >= '2023-01-01' AND o.created_at < '2024-01-01')
SELECT c.country, counted.month, COUNT(*) AS orders, printf('%.2f', SUM(rev)) AS revenue
FROM counted JOIN customers c ON c.id = counted.customer_id
GROUP BY c.country, counted.month ORDER BY c.country, counted.month;
SQL
sqlite3 -readonly shop.db < /tmp/q.sql > monthly_revenue.csv
sed -i 's/\r$//' monthly_revenue.csv
sqlite3 -readonly -json shop.db "
WITH item_rev AS (SELECT order_id, SUM(quantity * unit_price) AS rev FROM order_items GROUP BY order_id),
counted AS (
  SELECT o.customer_id, COALESCE(ir.rev, 0) AS rev
  FROM orders o LEFT JOIN item_rev ir ON ir.order_id = o.id
  WHERE o.status = 'completed' AND o.created_at >= '2023-01-01' AND o.created_at < '2024-01-01')
SELECT c.id AS customer_id, c.name, c.country, ROUND(SUM(rev), 2) AS revenue
FROM counted JOIN customers c ON c.id = counted.customer_id
GROUP BY c.id ORDER BY SUM(rev) DESC, c.id LIMIT 5;" > top_customers.json
