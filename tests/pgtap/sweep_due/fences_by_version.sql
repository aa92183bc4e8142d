-- A timer row made for another deadline version than the order's cannot
-- cancel the order (fencing): it is moot. Once it is gone, the fallback
-- catches the overdue order.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('o1');
-- The order moved on to version 2 (as after a deadline change) while its
-- version-1 timer row stays.
UPDATE ordertimeout.orders SET deadline_version = 2 WHERE order_id = 'o1';

SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 0, 0, 1)$$,
    'the version-1 timer is claimed but cancels nothing');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PENDING', 'the order is still PENDING');
SELECT is_empty($$SELECT 1 FROM public.river_job$$, 'the stale timer row is deleted');

-- A second later (the order is a minute overdue: only a sweep that looks
-- at every due row finds it, at least once a second; _scan_from).
UPDATE ordertimeout.scan_state SET scanned_at = scanned_at - interval '1 second';
SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 1, 1, 0)$$,
    'the next sweep catches the overdue order without a timer');
SELECT is((SELECT (status, cancel_cause) FROM ordertimeout.order_info('o1')), ROW('CANCELLED'::text, 'sweep'::text),
    'cancelled with cause sweep');

SELECT * FROM finish();
ROLLBACK;
