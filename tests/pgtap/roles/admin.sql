-- ordertimeout_admin may administer stock, points and settings and read every
-- ordertimeout table, but not write the tables directly.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

SET LOCAL ROLE ordertimeout_admin;

SELECT lives_ok($$SELECT ordertimeout.put_stock('A', 10)$$, 'can put_stock');
SELECT lives_ok($$SELECT ordertimeout.put_points('acct', 10)$$, 'can put_points');
SELECT lives_ok($$SELECT ordertimeout.configure(grace => interval '0')$$, 'can configure');
SELECT lives_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]')$$, 'can create_order');
SELECT lives_ok($$SELECT * FROM ordertimeout.sweep_due()$$, 'can sweep_due');
SELECT results_eq($$SELECT order_id, status::text FROM ordertimeout.orders$$, $$VALUES ('o1', 'PENDING')$$,
    'can SELECT ordertimeout.orders');
SELECT throws_ok($$UPDATE ordertimeout.stock SET available = 0$$, '42501', NULL, 'cannot UPDATE a table directly');

SELECT * FROM finish();
ROLLBACK;
