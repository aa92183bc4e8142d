-- begin_payment's argument errors: OT100 NULL, OT101 bad order_id, OT121 bad
-- payment_id, OT125 bad window, OT120 unknown order, OT124 a payment_id of
-- another order; none writes anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(13);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o2', 'p2');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.begin_payment(NULL, 'p1')$$, 'OT100', NULL, 'order_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', NULL)$$, 'OT100', NULL, 'payment_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('', 'p1')$$, 'OT101', NULL, 'empty order_id: OT101');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', '')$$, 'OT121', NULL, 'empty payment_id: OT121');
SELECT throws_ok(format('SELECT ordertimeout.begin_payment(''o1'', %L)', repeat('p', 129)),
    'OT121', NULL, 'payment_id of 129 characters: OT121');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', E'p\t1')$$, 'OT121', NULL,
    'payment_id with a control character: OT121');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p1', interval '0')$$, 'OT125', NULL, 'window 0: OT125');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p1', interval '-1 minute')$$, 'OT125', NULL,
    'negative window: OT125');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p1', interval '31 days')$$, 'OT125', NULL,
    'window 31 days: OT125');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('nope', 'p1')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p2')$$, 'OT124', NULL,
    'payment_id of another order: OT124');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT lives_ok(format('SELECT ordertimeout.begin_payment(''o1'', %L)', repeat('p', 128)),
    'payment_id of 128 characters is fine');

SELECT * FROM finish();
ROLLBACK;
