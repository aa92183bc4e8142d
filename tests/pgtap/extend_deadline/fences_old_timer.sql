-- After extend_deadline, a stale timer row of the old version (one a sweep
-- held while the extension ran) cannot cancel the order, and a gateway check
-- made for the old version cannot either.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.extend_deadline('o1', interval '1 hour');
SELECT test.insert_timer('o1', 1, clock_timestamp() - interval '1 minute');

SELECT results_eq(
    $$SELECT claimed, cancelled, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 0, 1)$$,
    'the stale version-1 timer is claimed but moot');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PENDING', 'the order stays PENDING');
SELECT is((SELECT args ->> 'version' FROM public.river_job), '2', 'the version-2 timer stays');

-- An order awaiting a gateway check, then extended.
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"precheck": "always"}');
SELECT test.make_due('o2');
SELECT ordertimeout.sweep_due();
SELECT isnt((SELECT check_job_id FROM ordertimeout.orders WHERE order_id = 'o2'), NULL, 'o2 awaits its gateway check at version 1');
SELECT ordertimeout.extend_deadline('o2', interval '1 hour');
SELECT is((SELECT check_job_id FROM ordertimeout.orders WHERE order_id = 'o2'), NULL, 'the extension clears check_job_id');
SELECT is(ordertimeout.cancel_checked('o2', 1), false, 'the old check cannot cancel the extended order');

SELECT * FROM finish();
ROLLBACK;
