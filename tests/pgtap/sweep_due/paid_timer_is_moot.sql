-- A timer row left behind for a PAID order (the payment could not delete it
-- while a sweep held it) is claimed, counted as moot and deleted; the order
-- stays PAID.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT test.insert_timer('o1', 1, clock_timestamp() - interval '1 minute');

SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, checks, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 0, 0, 0, 1)$$,
    'the stale timer is claimed and counted as moot');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PAID', 'the order stays PAID');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE queue = 'ordertimeout_expire'$$, 'the stale timer row is deleted');
SELECT results_eq(
    $$SELECT available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock$$,
    $$VALUES (9::bigint, 0::bigint, 1::bigint)$$,
    'nothing released');

SELECT * FROM finish();
ROLLBACK;
