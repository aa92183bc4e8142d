-- extend_deadline moves expire_at and cancel_at by the given interval, bumps
-- the deadline version and replaces the timer row with one for the new
-- version at the new cancel_at.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
CREATE TEMP TABLE placed AS SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT test.timer_of('o1') AS old_timer \gset

CREATE TEMP TABLE extended AS SELECT * FROM ordertimeout.extend_deadline('o1', interval '15 minutes');

SELECT is((SELECT (status, deadline_version) FROM extended), ROW('PENDING'::text, 2), 'still PENDING, version 2');
SELECT is((SELECT expire_at FROM extended) - (SELECT expire_at FROM placed), interval '15 minutes', 'expire_at moved by 15 minutes');
SELECT is((SELECT cancel_at FROM extended) - (SELECT cancel_at FROM placed), interval '15 minutes', 'cancel_at moved by 15 minutes');
SELECT is_empty(format('SELECT 1 FROM public.river_job WHERE id = %s', :old_timer), 'the old timer row is gone');
SELECT results_eq(
    $$SELECT id = (SELECT timer_job_id FROM ordertimeout.orders), args, scheduled_at = (SELECT cancel_at FROM extended)
        FROM public.river_job$$,
    $$VALUES (true, '{"order_id": "o1", "version": 2}'::jsonb, true)$$,
    'one timer row, for version 2, at the new cancel_at, named by timer_job_id');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text, (detail ->> 'extended_by_seconds')::numeric FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('PENDING', 'PENDING', 'requested', 900::numeric)$$,
    'an event records the extension');

-- Extending an overdue order brings it back from being due.
SELECT test.make_due('o1');
SELECT ordertimeout.extend_deadline('o1', interval '1 hour');
SELECT results_eq(
    $$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$,
    $$VALUES (0, 0)$$,
    'an overdue order given an hour more is no longer due');

SELECT * FROM finish();
ROLLBACK;
