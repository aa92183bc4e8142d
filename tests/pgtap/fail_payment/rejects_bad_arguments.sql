-- fail_payment's errors: OT127 unknown payment, OT124 a payment of another
-- order, OT120 unknown order, OT121, OT101, OT100; none writes anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o2', 'p2');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.fail_payment('o1', 'p9')$$, 'OT127', NULL, 'unknown payment: OT127');
SELECT throws_ok($$SELECT ordertimeout.fail_payment('o1', 'p2')$$, 'OT124', NULL, 'payment of another order: OT124');
SELECT throws_ok($$SELECT ordertimeout.fail_payment('nope', 'p1')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT ordertimeout.fail_payment('o1', '')$$, 'OT121', NULL, 'empty payment_id: OT121');
SELECT throws_ok($$SELECT ordertimeout.fail_payment('', 'p1')$$, 'OT101', NULL, 'empty order_id: OT101');
SELECT throws_ok($$SELECT ordertimeout.fail_payment(NULL, 'p1')$$, 'OT100', NULL, 'order_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.fail_payment('o1', NULL)$$, 'OT100', NULL, 'payment_id NULL: OT100');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
