-- sweep_due runs the cached generic plans for a small batch and switches to
-- plans made for its arrays (plan_cache_mode = force_custom_plan) for a
-- batch of 100 orders or more. Both cancel every due order, release its stock
-- once and delete its timer row; the switch stays inside the call and never
-- changes the caller's plan_cache_mode.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SET LOCAL plan_cache_mode = auto;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 1000), ('B', 1000);
SELECT count(ordertimeout.create_order('small' || i, '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]'))
FROM generate_series(1, 3) AS i;
SELECT count(ordertimeout.create_order('big' || i, '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]'))
FROM generate_series(1, 150) AS i;
SELECT count(test.make_due('small' || i, interval '1 minute')) FROM generate_series(1, 3) AS i;

SELECT results_eq(
    $$SELECT claimed, cancelled, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (3, 3, 0)$$,
    'a small batch (generic plans) cancels its 3 due orders');
SELECT is(current_setting('plan_cache_mode'), 'auto', 'the caller''s plan_cache_mode is unchanged after a small batch');

SELECT count(test.make_due('big' || i, interval '1 minute')) FROM generate_series(1, 150) AS i;
SELECT results_eq(
    $$SELECT claimed, cancelled, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (150, 150, 0)$$,
    'a batch of 150 (custom plans) cancels its 150 due orders');
SELECT is(current_setting('plan_cache_mode'), 'auto', 'the switch to custom plans does not outlive the call');

SELECT is((SELECT count(*)::integer FROM ordertimeout.orders WHERE status = 'CANCELLED'), 153,
    'every due order is cancelled');
SELECT is((SELECT count(*)::integer FROM ordertimeout.releases), 306, 'released once: one ledger row per item');
SELECT results_eq(
    $$SELECT sku, available, reserved FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 1000::bigint, 0::bigint), ('B', 1000::bigint, 0::bigint)$$,
    'all the reserved stock is back');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE queue = 'ordertimeout_expire'), 0,
    'every claimed timer row is deleted');

-- A small batch after a big one runs the generic plans again.
SELECT ordertimeout.create_order('after', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('after', interval '1 minute');
SELECT results_eq(
    $$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 1)$$,
    'a small batch after a big one cancels its order');
SELECT is(current_setting('plan_cache_mode'), 'auto', 'and leaves plan_cache_mode as it was');

SELECT * FROM finish();
ROLLBACK;
