-- fail_payment with the payment id of a purged order's payment names it as
-- begin_payment and confirm_payment do (OT176), not as unknown (OT127), and
-- writes nothing. A review found the two answers differing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('f1', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.begin_payment('f1', 'f1-pay');
SELECT ordertimeout.confirm_payment('f1', 'f1-pay');
SELECT is(ordertimeout.purge_orders('0', 10, paid_older_than => '0'), 1, 'f1 purged');
SELECT ordertimeout.create_order('f1', '[{"sku":"A","qty":1}]');
SELECT test.snapshot() AS before \gset

SELECT throws_like($$SELECT ordertimeout.fail_payment('f1', 'f1-pay')$$,
    'payment_id "f1-pay" was of order "f1", purged at %: it is not a payment of order "f1" (a person checks it at the gateway)',
    'the purged order''s payment named');
SELECT throws_ok($$SELECT ordertimeout.fail_payment('f1', 'f1-pay')$$, 'OT176', NULL, 'with OT176');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
