-- begin_payment raises OT123 on a PAID or CANCELLED order and for a payment_id
-- that already finished, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('paid', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('paid', 'p1');
SELECT ordertimeout.create_order('cancelled', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.cancel_order('cancelled');
SELECT ordertimeout.create_order('failed', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('failed', 'p3');
SELECT ordertimeout.fail_payment('failed', 'p3');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.begin_payment('paid', 'p2')$$, 'OT123', NULL, 'PAID order: OT123');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('cancelled', 'p2')$$, 'OT123', NULL, 'CANCELLED order: OT123');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('failed', 'p3')$$, 'OT123', NULL,
    'a failed payment_id started again: OT123');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
