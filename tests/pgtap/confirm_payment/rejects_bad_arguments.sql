-- confirm_payment's errors: OT126 for a negative amount, OT124 for a payment
-- of another order, OT120, OT121, OT100; none writes anything. (An amount
-- that does not match the order's is money received: a conflict, see
-- amount_mismatch_is_conflict.sql.)
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10}');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o2', 'p2');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o2', 'p2', -1)$$, 'OT126', NULL, 'negative amount: OT126');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p2')$$, 'OT124', NULL,
    'payment_id of another order: OT124');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('nope', 'p9')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', '')$$, 'OT121', NULL, 'empty payment_id: OT121');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('', 'p1')$$, 'OT101', NULL, 'empty order_id: OT101');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment(NULL, 'p1')$$, 'OT100', NULL, 'order_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', NULL)$$, 'OT100', NULL, 'payment_id NULL: OT100');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
