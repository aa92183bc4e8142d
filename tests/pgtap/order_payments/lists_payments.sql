-- order_payments lists an order's payment attempts; unknown order: OT120.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.fail_payment('o1', 'p1');
SELECT ordertimeout.begin_payment('o1', 'p2');
SELECT ordertimeout.confirm_payment('o1', 'p2', 12);
SELECT ordertimeout.confirm_payment('o2', 'p9');

SELECT results_eq(
    $$SELECT payment_id, status, amount, started_at IS NOT NULL, confirmed_at IS NOT NULL, failed_at IS NOT NULL
        FROM ordertimeout.order_payments('o1')$$,
    $$VALUES ('p1', 'failed', NULL::numeric, true, false, true),
             ('p2', 'confirmed', 12, true, true, false)$$,
    'both attempts of o1, in the order they started');
SELECT is_empty($$SELECT 1 FROM ordertimeout.order_payments('o1') WHERE payment_id = 'p9'$$, 'not another order''s payments');
SELECT throws_ok($$SELECT * FROM ordertimeout.order_payments('nope')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT * FROM ordertimeout.order_payments(NULL)$$, 'OT100', NULL, 'NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
