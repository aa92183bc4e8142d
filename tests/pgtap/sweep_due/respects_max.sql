-- sweep_due claims at most max timeouts per call, oldest first; max must be
-- between 1 and 100000 (OT140) and not NULL (OT100).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('older', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('newer', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('older', interval '2 minutes');
SELECT test.make_due('newer', interval '1 minute');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT * FROM ordertimeout.sweep_due(0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT * FROM ordertimeout.sweep_due(100001)$$, 'OT140', NULL, 'max 100001: OT140');
SELECT throws_ok($$SELECT * FROM ordertimeout.sweep_due(NULL)$$, 'OT100', NULL, 'max NULL: OT100');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT results_eq(
    $$SELECT claimed, cancelled FROM ordertimeout.sweep_due(1)$$,
    $$VALUES (1, 1)$$,
    'max 1: one order');
SELECT results_eq(
    $$SELECT order_id, status::text FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('newer', 'PENDING'), ('older', 'CANCELLED')$$,
    'the one due longest is cancelled first');
SELECT results_eq(
    $$SELECT claimed, cancelled FROM ordertimeout.sweep_due(1)$$,
    $$VALUES (1, 1)$$,
    'the next call takes the next one');

SELECT * FROM finish();
ROLLBACK;
