-- preview_due lists the orders sweep_due would cancel (action cancel) or hand
-- to a gateway check (action check), found by their timer or by the fallback,
-- and changes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('timer', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('lost', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('attempted', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('attempted', 'p1');
SELECT ordertimeout.fail_payment('attempted', 'p1');
SELECT ordertimeout.create_order('later', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('stale', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.extend_deadline('stale', interval '1 hour');
SELECT test.make_due('timer', interval '3 minutes');
SELECT test.make_due('lost', interval '2 minutes');
SELECT test.make_due('attempted', interval '1 minute');
DELETE FROM public.river_job WHERE args ->> 'order_id' = 'lost';
SELECT test.insert_timer('stale', 1, clock_timestamp() - interval '1 minute');   -- a stale, due timer
SELECT test.snapshot() AS before \gset

SELECT results_eq(
    $$SELECT order_id, deadline_version, found_by, action, overdue > interval '0' FROM ordertimeout.preview_due()$$,
    $$VALUES ('timer', 1, 'timer', 'cancel', true), ('lost', 1, 'sweep', 'cancel', true),
             ('attempted', 3, 'timer', 'check', true)$$,
    'the due orders, oldest first, with how they are found and what would happen');
SELECT is(test.snapshot(), :'before'::jsonb, 'preview_due changed nothing');
SELECT results_eq(
    $$SELECT order_id FROM ordertimeout.preview_due(1)$$,
    $$VALUES ('timer')$$,
    'max limits the list');

CREATE TEMP TABLE preview AS SELECT * FROM ordertimeout.preview_due();
SELECT results_eq(
    $$SELECT cancelled, checks FROM ordertimeout.sweep_due()$$,
    $$VALUES (2, 1)$$,
    'sweep_due then cancels two and checks one');
SELECT set_eq(
    $$SELECT order_id FROM ordertimeout.orders WHERE status = 'CANCELLED'$$,
    $$SELECT order_id FROM preview WHERE action = 'cancel'$$,
    'exactly the orders the preview said it would cancel');
SELECT set_eq(
    $$SELECT order_id FROM ordertimeout.orders WHERE check_job_id IS NOT NULL$$,
    $$SELECT order_id FROM preview WHERE action = 'check'$$,
    'exactly the orders the preview said it would check');

SELECT * FROM finish();
ROLLBACK;
