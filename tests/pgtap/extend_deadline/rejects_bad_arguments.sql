-- extend_deadline's errors: OT141 for by out of (0, 30 days], OT100 NULL,
-- OT123 for an order that is not PENDING, OT120 unknown order; none writes
-- anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(9);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('paying', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('paying', 'p1');
SELECT ordertimeout.create_order('cancelled', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.cancel_order('cancelled');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', interval '0')$$, 'OT141', NULL, 'by 0: OT141');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', interval '-1 minute')$$, 'OT141', NULL, 'negative by: OT141');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', interval '31 days')$$, 'OT141', NULL, 'by 31 days: OT141');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', NULL)$$, 'OT100', NULL, 'by NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline(NULL, interval '1 minute')$$, 'OT100', NULL, 'order_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('paying', interval '1 minute')$$, 'OT123', NULL, 'PAYING order: OT123');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('cancelled', interval '1 minute')$$, 'OT123', NULL, 'CANCELLED order: OT123');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('nope', interval '1 minute')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
