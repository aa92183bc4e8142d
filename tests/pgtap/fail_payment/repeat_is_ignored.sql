-- fail_payment for a payment that is no longer started returns ignored and
-- writes nothing: a repeat, or a failure after the confirmation.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.fail_payment('o1', 'p1');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o2', 'p2');
SELECT ordertimeout.confirm_payment('o2', 'p2');
SELECT test.snapshot() AS before \gset

SELECT is(ordertimeout.fail_payment('o1', 'p1'), 'ignored', 'a repeat returns ignored');
SELECT is(ordertimeout.fail_payment('o2', 'p2'), 'ignored', 'a failure after the confirmation returns ignored');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT is((SELECT status FROM ordertimeout.order_info('o2')), 'PAID', 'the paid order stays PAID');

SELECT * FROM finish();
ROLLBACK;
