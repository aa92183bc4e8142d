-- plan_next_sweep after a sweep that passed due rows over: timer rows due by
-- held_due_by count as due again only after a pause as long as the newest
-- of them has been due, at most retry_held_in (held is then true); every row
-- due after held_due_by at its moment; max_sleep still bounds the sleep;
-- the same in the sweep's 2-second window. held_due_by and retry_held_in go
-- together (OT100), retry_held_in is more than 0 and at most 1 hour (OT141),
-- held_due_by is not ahead of the clock (OT156). plan_sleep(max_sleep) is the
-- wake_at of plan_next_sweep(max_sleep).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(23);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.configure(grace => interval '0');
SELECT ordertimeout.create_order('old', '[{"sku": "A", "qty": 1}]', interval '1 minute');
SELECT ordertimeout.create_order('young', '[{"sku": "A", "qty": 1}]', interval '1 minute');
SELECT ordertimeout.create_order('next', '[{"sku": "A", "qty": 1}]', interval '5 seconds');
-- Two orders came due, 10 s and 1 s ago (their timer rows moved back by
-- hand); a sweep passed them over.
UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '10 seconds'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'old';
UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '1 second'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'young';
CREATE TEMP TABLE due AS
SELECT (SELECT due_at FROM ordertimeout._timers WHERE args ->> 'order_id' = 'old') AS old,
       (SELECT due_at FROM ordertimeout._timers WHERE args ->> 'order_id' = 'young') AS young,
       (SELECT due_at FROM ordertimeout._timers WHERE args ->> 'order_id' = 'next') AS next,
       clock_timestamp() AS swept_at;
-- plan(max_sleep, retry_held_in): wake_at - clock_timestamp() and held.
CREATE FUNCTION pg_temp.plan(max_sleep interval, retry interval) RETURNS TABLE (sleep interval, held boolean)
LANGUAGE sql AS $$
    SELECT p.wake_at - clock_timestamp(), p.held
    FROM ordertimeout.plan_next_sweep(max_sleep, (SELECT swept_at FROM due), retry) AS p
$$;

SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour')),
          (SELECT row(old, false)::text FROM due),
    'no held_due_by: the oldest due order is the earliest, and nothing is held');
SELECT is(ordertimeout.plan_sleep(interval '1 hour'), (SELECT old FROM due),
    'plan_sleep(max_sleep) is the wake_at of plan_next_sweep(max_sleep)');

SELECT ok((SELECT held AND sleep BETWEEN interval '0.8 seconds' AND interval '1 second' + interval '500 milliseconds'
             FROM pg_temp.plan(interval '1 hour', interval '1 hour')),
    'held rows: tried again after as long as the newest of them has been due (1 s), not the oldest (10 s)');
SELECT ok((SELECT held AND sleep BETWEEN interval '100 milliseconds' AND interval '200 milliseconds'
             FROM pg_temp.plan(interval '1 hour', interval '200 milliseconds')),
    'at most retry_held_in');
CREATE TEMP TABLE planned AS
SELECT p.wake_at FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT swept_at FROM due), interval '2 seconds') AS p;
SELECT is((SELECT wake_at FROM ordertimeout.sweep_state), (SELECT wake_at FROM planned),
    'that moment is recorded in sweep_state.wake_at, so an order due sooner sends a wake-up');
SELECT ok((SELECT held AND sleep BETWEEN interval '200 milliseconds' AND interval '300 milliseconds'
             FROM pg_temp.plan(interval '300 milliseconds', interval '1 hour')),
    'max_sleep still bounds the sleep');
SELECT is((SELECT row(wake_at, held)::text
             FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT old - interval '1 microsecond' FROM due), interval '1 hour')),
          (SELECT row(old, false)::text FROM due),
    'a row due after held_due_by is not held');
SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour', '-infinity', interval '1 hour')),
          (SELECT row(old, false)::text FROM due),
    'held_due_by -infinity holds nothing');

-- Only the old one held: its pause (10 s) is longer than the wait for the
-- next order, so the next order's moment comes first.
DELETE FROM public.river_job WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'young';
SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT swept_at FROM due), interval '1 hour')),
          (SELECT row(next, true)::text FROM due),
    'a row due after held_due_by and before the held rows'' pause: its moment');

-- In the 2-second window (a full look a moment ago): the old row is outside
-- it, so it is not looked at when the window has a row within a second.
UPDATE ordertimeout.scan_state SET scanned_at = clock_timestamp(), backlog = false;
UPDATE public.river_job SET scheduled_at = clock_timestamp() + interval '500 milliseconds'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'next';
SELECT ok((SELECT NOT held AND sleep BETWEEN interval '0' AND interval '500 milliseconds'
             FROM pg_temp.plan(interval '1 hour', interval '1 hour')),
    'window: a row within a second, the old one outside the window is not looked at');
UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '1 second'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'next';
SELECT ok((SELECT held AND sleep BETWEEN interval '0.8 seconds' AND interval '1.5 seconds'
             FROM pg_temp.plan(interval '1 hour', interval '1 hour')),
    'window: a held row in it is held, its pause as long as it has been due');
UPDATE public.river_job SET scheduled_at = clock_timestamp() + interval '5 seconds'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'next';
SELECT ok((SELECT held AND sleep BETWEEN interval '4 seconds' AND interval '5 seconds'
             FROM pg_temp.plan(interval '1 hour', interval '1 hour')),
    'window: nothing within a second, so every row is looked at: the old one is held, and the next order''s moment comes first');
SELECT is((SELECT scanned_at IS NOT NULL FROM ordertimeout.scan_state), true, 'the window was on');

-- No row due by held_due_by: nothing is held and the retry does not matter.
DELETE FROM public.river_job WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'old';
SELECT ok((SELECT NOT held AND sleep > interval '4 seconds'
             FROM pg_temp.plan(interval '1 hour', interval '1 millisecond')),
    'no row due by held_due_by: the next one, not the retry');
DELETE FROM public.river_job WHERE queue = 'ordertimeout_expire';
SELECT ok((SELECT NOT held AND sleep BETWEEN interval '9 seconds' AND interval '10 seconds'
             FROM pg_temp.plan(interval '10 seconds', interval '1 millisecond')),
    'no timer row at all: max_sleep away, nothing held');

SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), NULL)$$, 'OT100',
    NULL, 'held_due_by without retry_held_in: OT100');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', NULL, interval '1 second')$$, 'OT100',
    NULL, 'retry_held_in without held_due_by: OT100');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), interval '0')$$, 'OT141',
    'retry_held_in must be more than 0 and at most 1 hour, with no negative part, got 00:00:00', 'retry_held_in 0: OT141, named');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), interval '1 day -23 hours')$$, 'OT141',
    NULL, 'retry_held_in with a negative part: OT141');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), interval '61 minutes')$$, 'OT141',
    NULL, 'retry_held_in over an hour: OT141');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp() + interval '1 minute', interval '1 second')$$, 'OT156',
    NULL, 'held_due_by ahead of the clock: OT156');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(interval '1 second', 'infinity', interval '1 second')$$, 'OT156',
    NULL, 'held_due_by infinity: OT156');
SELECT throws_ok($$SELECT * FROM ordertimeout.plan_next_sweep(NULL)$$, 'OT100', NULL, 'max_sleep NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
