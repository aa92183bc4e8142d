-- preview_due says what sweep_due would do now. A timer row due before its
-- order's cancel_at (as River's UI "retry" makes it) is not a cancel: sweep_due
-- finds the order not due, and preview_due does not list it. While timeout
-- cancels are paused, sweep_due cancels nothing: preview_due lists the due
-- orders with action paused. A review found the first listed as cancel, and
-- the pause ignored.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('early', '[{"sku": "A", "qty": 1}]', interval '1 hour');
UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '1 second' WHERE args ->> 'order_id' = 'early';
SELECT is_empty($$SELECT * FROM ordertimeout.preview_due()$$, 'a timer row due before its order is not listed');
SELECT results_eq($$SELECT cancelled FROM ordertimeout.sweep_due(10)$$, $$VALUES (0)$$, 'and sweep_due cancels nothing');

SELECT ordertimeout.create_order('due', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('due', interval '1 minute');
SELECT ordertimeout.configure(paused => true);
SELECT results_eq($$SELECT order_id, action FROM ordertimeout.preview_due()$$,
    $$VALUES ('due', 'paused')$$, 'paused: the due order, action paused');
SELECT ordertimeout.configure(paused => false);
SELECT results_eq($$SELECT order_id, action FROM ordertimeout.preview_due()$$,
    $$VALUES ('due', 'cancel')$$, 'resumed: cancel');

SELECT * FROM finish();
ROLLBACK;
