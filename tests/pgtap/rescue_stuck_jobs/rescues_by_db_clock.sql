-- rescue_stuck_jobs hands back the jobs of queues ordertimeout and
-- ordertimeout_webhook that have been
-- running longer than running_for by the database clock, as River's rescuer
-- would: available again at once, discarded on the last attempt, cancelled
-- when a cancel was asked. Jobs of other queues, and jobs not yet stuck, are
-- left alone. Bad arguments: OT100, OT141, OT140; nothing written.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(14);

INSERT INTO public.river_job (id, kind, args, queue, state, attempt, max_attempts, attempted_at, scheduled_at, metadata)
VALUES
    (-1, 'ordertimeout_precancel_check', '{}', 'ordertimeout', 'running', 1, 25, clock_timestamp() - interval '10 minutes', clock_timestamp() - interval '10 minutes', '{}'),
    (-2, 'ordertimeout_precancel_check', '{}', 'ordertimeout', 'running', 25, 25, clock_timestamp() - interval '10 minutes', clock_timestamp() - interval '10 minutes', '{}'),
    (-3, 'ordertimeout_webhook', '{}', 'ordertimeout_webhook', 'running', 1, 25, clock_timestamp() - interval '10 minutes', clock_timestamp() - interval '10 minutes',
         jsonb_build_object('cancel_attempted_at', clock_timestamp())),
    (-4, 'ordertimeout_precancel_check', '{}', 'ordertimeout', 'running', 1, 25, clock_timestamp() - interval '30 seconds', clock_timestamp() - interval '30 seconds', '{}'),
    (-5, 'someone_elses_job', '{}', 'default', 'running', 1, 25, clock_timestamp() - interval '10 minutes', clock_timestamp() - interval '10 minutes', '{}');

SELECT throws_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs(NULL)$$, 'OT100', NULL, 'running_for NULL: OT100');
SELECT throws_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '0.5 seconds')$$, 'OT141', NULL, 'running_for under 1 second: OT141');
SELECT throws_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '2 days')$$, 'OT141', NULL, 'running_for over 1 day: OT141');
SELECT throws_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '1 minute', 0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT is((SELECT count(*) FROM public.river_job WHERE state = 'running'), 5::bigint, 'the refused calls wrote nothing');

SELECT results_eq($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '2 minutes')$$,
    $$VALUES (1, 1, 1)$$, 'one retried, one discarded, one cancelled');

SELECT results_eq($$SELECT id, state::text, finalized_at IS NOT NULL FROM public.river_job WHERE id < 0 ORDER BY id DESC$$,
    $$VALUES (-1::bigint, 'available', false), (-2::bigint, 'discarded', true), (-3::bigint, 'cancelled', true),
             (-4::bigint, 'running', false), (-5::bigint, 'running', false)$$,
    'each job in the state River''s rescuer would give it; not yet stuck and other queues untouched');
SELECT ok((SELECT scheduled_at BETWEEN clock_timestamp() - interval '1 minute' AND clock_timestamp() FROM public.river_job WHERE id = -1),
    'the retried job is due now');
SELECT is((SELECT errors[1] ->> 'error' FROM public.river_job WHERE id = -1) LIKE 'Stuck job rescued by ordertimeout.rescue_stuck_jobs%', true,
    'the rescue is recorded on the job');
SELECT is((SELECT (errors[1] ->> 'attempt')::int FROM public.river_job WHERE id = -1), 1, 'with the attempt it ended');
SELECT is((SELECT errors FROM public.river_job WHERE id = -4), NULL, 'a job not yet stuck has no error');

SELECT results_eq($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '2 minutes')$$,
    $$VALUES (0, 0, 0)$$, 'a second call finds nothing more');
SELECT results_eq($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '10 seconds', 1)$$,
    $$VALUES (1, 0, 0)$$, 'a shorter running_for takes the younger job too, max at a time');
SELECT is((SELECT state::text FROM public.river_job WHERE id = -4), 'available', 'the younger job is available again');

SELECT * FROM finish();
ROLLBACK;
