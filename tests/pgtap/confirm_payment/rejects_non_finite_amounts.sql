-- NaN, the infinities, negative and absurd amounts are refused with OT126
-- wherever an amount enters (create_order's options, confirm_payment), and a
-- bad currency with OT128; nothing is written. The constraints refuse them
-- too. Issue 9 reproduced: confirm_payment(..., 'NaN') returned paid and
-- stored NaN ('NaN' >= 0 is true in PostgreSQL).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(13);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.cancel_order('o2');

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 'NaN')$$, 'OT126', NULL, 'NaN: OT126');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 'Infinity')$$, 'OT126', NULL, 'Infinity: OT126');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o2', 'p2', 'Infinity')$$, 'OT126', NULL,
    'Infinity on a cancelled order: OT126, not a conflict');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', '-Infinity')$$, 'OT126', NULL, '-Infinity: OT126');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', -0.01)$$, 'OT126', NULL, 'negative: OT126');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 1e15)$$, 'OT126', NULL, '10^15: OT126');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 10, 'eur')$$, 'OT128', NULL, 'lower-case currency: OT128');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 10, 'EURO')$$, 'OT128', NULL, 'four letters: OT128');
SELECT throws_ok($$SELECT ordertimeout.create_order('o3', '[{"sku":"A","qty":1}]', NULL, '{"amount":1e400}')$$,
    'OT126', NULL, 'options.amount 1e400: OT126');
SELECT throws_ok($$SELECT ordertimeout.create_order('o3', '[{"sku":"A","qty":1}]', NULL, '{"amount":-5}')$$,
    'OT126', NULL, 'options.amount negative: OT126');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT throws_ok($$UPDATE ordertimeout.orders SET amount = 'NaN' WHERE order_id = 'o1'$$, '23514', NULL,
    'orders refuse NaN by constraint');
SELECT ordertimeout.confirm_payment('o1', 'p1', 10);
SELECT throws_ok($$UPDATE ordertimeout.payments SET amount = 'NaN' WHERE payment_id = 'p1'$$, '23514', NULL,
    'payments refuse NaN by constraint');

SELECT * FROM finish();
ROLLBACK;
