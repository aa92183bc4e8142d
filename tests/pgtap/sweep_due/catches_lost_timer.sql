-- A PENDING order past cancel_at whose timer row is lost is cancelled by the
-- fallback with cause sweep and counted as caught_by_sweep, in sweep_due's
-- result and in the view sweep_stats.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('lost', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('kept', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('lost', interval '3 minutes');
SELECT test.make_due('kept');
DELETE FROM public.river_job WHERE args ->> 'order_id' = 'lost';

SELECT results_eq(
    $$SELECT due_timers, overdue_orders, caught_by_sweep FROM ordertimeout.sweep_stats$$,
    $$VALUES (1::bigint, 2::bigint, 0::bigint)$$,
    'before: one due timer, two overdue orders, none caught by sweep');
SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, checks, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (2, 2, 1, 0, 0)$$,
    'one timeout by its timer, one caught by the sweep');
SELECT results_eq(
    $$SELECT order_id, status::text, cancel_cause::text FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('kept', 'CANCELLED', 'timeout'), ('lost', 'CANCELLED', 'sweep')$$,
    'the order without its timer is cancelled with cause sweep');
SELECT results_eq(
    $$SELECT cause::text, lateness >= interval '3 minutes' FROM ordertimeout.events WHERE order_id = 'lost' AND to_status = 'CANCELLED'$$,
    $$VALUES ('sweep', true)$$,
    'its event has cause sweep and its lateness');
SELECT results_eq(
    $$SELECT cause FROM ordertimeout.releases WHERE order_id = 'lost'$$,
    $$VALUES ('sweep')$$,
    'its stock is released with cause sweep');
SELECT results_eq(
    $$SELECT due_timers, overdue_orders, caught_by_sweep FROM ordertimeout.sweep_stats$$,
    $$VALUES (0::bigint, 0::bigint, 1::bigint)$$,
    'after: sweep_stats.caught_by_sweep = 1');
SELECT results_eq(
    $$SELECT order_id, cause::text FROM ordertimeout.cancel_lag ORDER BY order_id$$,
    $$VALUES ('kept', 'timeout'), ('lost', 'sweep')$$,
    'cancel_lag lists both causes');
SELECT is_empty($$SELECT 1 FROM ordertimeout.preview_due()$$, 'nothing is due any more');

SELECT * FROM finish();
ROLLBACK;
