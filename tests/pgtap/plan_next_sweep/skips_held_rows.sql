-- plan_next_sweep after a sweep that passed due rows over: timer rows due by
-- held_due_by count as due only retry_held_in from now (held is then true),
-- every row due after it at its moment, and max_sleep still bounds the
-- sleep. held_due_by and retry_held_in go together (OT100), retry_held_in is
-- 0 to 1 hour (OT141), held_due_by is not ahead of the clock (OT156).
-- plan_sleep(max_sleep) is the wake_at of plan_next_sweep(max_sleep).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(19);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('held', '[{"sku": "A", "qty": 1}]', interval '1 minute');
SELECT ordertimeout.create_order('next', '[{"sku": "A", "qty": 1}]', interval '20 seconds');
-- The held order came due a second ago (its timer row moved back by hand).
UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '1 second'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'held';
CREATE TEMP TABLE due AS
SELECT (SELECT due_at FROM ordertimeout._timers WHERE args ->> 'order_id' = 'held') AS held,
       (SELECT due_at FROM ordertimeout._timers WHERE args ->> 'order_id' = 'next') AS next,
       clock_timestamp() AS swept_at;

SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour')),
          (SELECT row(held, false)::text FROM due),
    'no held_due_by: the held order is the earliest due, and nothing is held');
SELECT is(ordertimeout.plan_sleep(interval '1 hour'), (SELECT held FROM due),
    'plan_sleep(max_sleep) is the wake_at of plan_next_sweep(max_sleep)');

CREATE TEMP TABLE planned AS
SELECT p.*, clock_timestamp() AS at FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT swept_at FROM due), interval '5 seconds') AS p;
SELECT ok((SELECT wake_at - at BETWEEN interval '4 seconds' AND interval '5 seconds' FROM planned),
    'held rows: tried again retry_held_in from now');
SELECT ok((SELECT held FROM planned), 'held says so');
SELECT is((SELECT wake_at FROM ordertimeout.sweep_state), (SELECT wake_at FROM planned),
    'that moment is recorded in sweep_state.wake_at, so an order due sooner sends a wake-up');

SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT swept_at FROM due), interval '1 hour')),
          (SELECT row(next, true)::text FROM due),
    'a row due after held_due_by and before the retry: its moment');
SELECT ok((SELECT wake_at - clock_timestamp() BETWEEN interval '2 seconds' AND interval '3 seconds'
             FROM ordertimeout.plan_next_sweep(interval '3 seconds', (SELECT swept_at FROM due), interval '1 hour')),
    'max_sleep still bounds the sleep');
SELECT is((SELECT row(wake_at, held)::text
             FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT held - interval '1 microsecond' FROM due), interval '1 hour')),
          (SELECT row(held, false)::text FROM due),
    'a row due after held_due_by is not held');
SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour', '-infinity', interval '1 hour')),
          (SELECT row(held, false)::text FROM due),
    'held_due_by -infinity holds nothing');

-- Without the held row, nothing is held and the retry does not matter.
DELETE FROM public.river_job WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'held';
SELECT is((SELECT row(wake_at, held)::text FROM ordertimeout.plan_next_sweep(interval '1 hour', (SELECT swept_at FROM due), interval '1 millisecond')),
          (SELECT row(next, false)::text FROM due),
    'no row due by held_due_by: the next one, not the retry');
DELETE FROM public.river_job WHERE queue = 'ordertimeout_expire';
SELECT ok((SELECT NOT held AND wake_at - clock_timestamp() BETWEEN interval '9 seconds' AND interval '10 seconds'
             FROM ordertimeout.plan_next_sweep(interval '10 seconds', (SELECT swept_at FROM due), interval '1 millisecond')),
    'no timer row at all: max_sleep away, nothing held');

SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), NULL)$$, 'OT100',
    NULL, 'held_due_by without retry_held_in: OT100');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', NULL, interval '1 second')$$, 'OT100',
    NULL, 'retry_held_in without held_due_by: OT100');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), interval '-1 millisecond')$$, 'OT141',
    'retry_held_in must be between 0 and 1 hour, with no negative part, got -00:00:00.001', 'retry_held_in negative: OT141, named');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), interval '1 day -23 hours')$$, 'OT141',
    NULL, 'retry_held_in with a negative part: OT141');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp(), interval '61 minutes')$$, 'OT141',
    NULL, 'retry_held_in over an hour: OT141');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', clock_timestamp() + interval '1 minute', interval '1 second')$$, 'OT156',
    NULL, 'held_due_by ahead of the clock: OT156');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(interval '1 second', 'infinity', interval '1 second')$$, 'OT156',
    NULL, 'held_due_by infinity: OT156');
SELECT throws_ok($$SELECT ordertimeout.plan_next_sweep(NULL)$$, 'OT100', NULL, 'max_sleep NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
