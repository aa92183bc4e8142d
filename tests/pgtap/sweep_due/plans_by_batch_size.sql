-- sweep_due runs cached generic plans made for index access for a sweep that
-- claims fewer than 100 timer rows, and switches to plans made for its arrays
-- (plan_cache_mode = force_custom_plan, sequential scans and hash and merge
-- joins allowed) from 100 on. Both cancel every due order, release its stock
-- once and delete its timer row; the switch stays inside the call and never
-- changes the caller's settings. A statement trigger on the event log, which
-- the cancels write to after the switch, records the settings in effect.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SET LOCAL plan_cache_mode = auto;
SET LOCAL enable_hashjoin = off;   -- the caller's own choice, which must survive
SELECT plan(14);

CREATE TEMP TABLE seen (plan_cache_mode text, enable_seqscan text, enable_hashjoin text, jit text);
CREATE FUNCTION test.record_settings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO seen VALUES (current_setting('plan_cache_mode'), current_setting('enable_seqscan'),
                             current_setting('enable_hashjoin'), current_setting('jit'));
    RETURN NULL;
END
$$;
CREATE TRIGGER record_settings AFTER INSERT ON ordertimeout.events
    FOR EACH STATEMENT EXECUTE FUNCTION test.record_settings();

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 1000), ('B', 1000);
SELECT count(ordertimeout.create_order('small' || i, '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]'))
FROM generate_series(1, 99) AS i;
SELECT count(ordertimeout.create_order('big' || i, '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]'))
FROM generate_series(1, 100) AS i;
SELECT count(test.make_due('small' || i, interval '1 minute')) FROM generate_series(1, 99) AS i;
TRUNCATE seen;

SELECT results_eq(
    $$SELECT claimed, cancelled, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (99, 99, 0)$$,
    'a sweep of 99 cancels its 99 due orders');
SELECT results_eq(
    $$SELECT DISTINCT * FROM seen$$,
    $$VALUES ('force_generic_plan', 'off', 'off', 'off')$$,
    '99 orders: generic plans for index access, without JIT');
SELECT is(current_setting('plan_cache_mode'), 'auto', 'the caller''s plan_cache_mode is unchanged after a small sweep');

SELECT count(test.make_due('big' || i, interval '1 minute')) FROM generate_series(1, 100) AS i;
TRUNCATE seen;
SELECT results_eq(
    $$SELECT claimed, cancelled, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (100, 100, 0)$$,
    'a sweep of 100 cancels its 100 due orders');
SELECT results_eq(
    $$SELECT DISTINCT * FROM seen$$,
    $$VALUES ('force_custom_plan', 'on', 'on', 'off')$$,
    '100 orders: custom plans, every join method and sequential scans allowed');
SELECT is(current_setting('plan_cache_mode'), 'auto', 'the switch to custom plans does not outlive the call');
SELECT is(current_setting('enable_hashjoin'), 'off', 'nor does the switch of enable_hashjoin: the caller''s value is back');
SELECT is(current_setting('enable_seqscan'), 'on', 'nor that of enable_seqscan');

SELECT is((SELECT count(*)::integer FROM ordertimeout.orders WHERE status = 'CANCELLED'), 199,
    'every due order is cancelled');
SELECT is((SELECT count(*)::integer FROM ordertimeout.releases), 398, 'released once: one ledger row per item');
SELECT results_eq(
    $$SELECT sku, available::bigint, reserved::bigint FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 1000::bigint, 0::bigint), ('B', 1000::bigint, 0::bigint)$$,
    'all the reserved stock is back');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE queue = 'ordertimeout_expire'), 0,
    'every claimed timer row is deleted');

-- A small sweep after a big one runs the generic plans again.
SELECT ordertimeout.create_order('after', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('after', interval '1 minute');
TRUNCATE seen;
SELECT results_eq(
    $$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 1)$$,
    'a small sweep after a big one cancels its order');
SELECT results_eq(
    $$SELECT DISTINCT * FROM seen$$,
    $$VALUES ('force_generic_plan', 'off', 'off', 'off')$$,
    'and plans generically again');

SELECT * FROM finish();
ROLLBACK;
