-- order_info returns one order's state (created false), and raises OT120 for
-- an unknown order, OT101 for a bad id and OT100 for NULL.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 10);
CREATE TEMP TABLE placed AS
SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "B", "qty": 1}, {"sku": "A", "qty": 2}]', interval '10 minutes',
                                        '{"coupon": "C1", "amount": 3.5, "currency": "USD"}');

SELECT is((SELECT (order_id, status, created, deadline_version, items, coupon_id, amount, currency, open_conflicts)
             FROM ordertimeout.order_info('o1')),
    ROW('o1'::text, 'PENDING'::text, false, 1, '[{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}]'::jsonb,
        'C1'::text, 3.5::numeric, 'USD'::text, 0),
    'the order as create_order left it; created is false');
SELECT is((SELECT (created_at, expire_at, cancel_at) FROM ordertimeout.order_info('o1')),
          (SELECT (created_at, expire_at, cancel_at) FROM placed), 'the same deadlines');

SELECT ordertimeout.cancel_order('o1');
SELECT is((SELECT (status, cancel_cause, cancelled_at IS NOT NULL) FROM ordertimeout.order_info('o1')),
    ROW('CANCELLED'::text, 'requested'::text, true), 'a cancel shows');

SELECT throws_ok($$SELECT * FROM ordertimeout.order_info('nope')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT * FROM ordertimeout.order_info('')$$, 'OT101', NULL, 'empty order_id: OT101');
SELECT throws_ok($$SELECT * FROM ordertimeout.order_info(NULL)$$, 'OT100', NULL, 'NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
