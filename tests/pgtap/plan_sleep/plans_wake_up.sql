-- plan_sleep returns when to sweep next, the earliest due timer but at most
-- max_sleep away, and records it in sweep_state; max_sleep must be between 0
-- and 1 hour (OT141) and not NULL (OT100).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

SELECT ok(ordertimeout.plan_sleep(interval '10 seconds') - clock_timestamp() BETWEEN interval '9 seconds' AND interval '10 seconds',
    'no timer: max_sleep away');
CREATE TEMP TABLE planned AS SELECT ordertimeout.plan_sleep(interval '30 seconds') AS wake_at;
SELECT is((SELECT wake_at FROM ordertimeout.sweep_state), (SELECT wake_at FROM planned),
    'the moment is recorded in sweep_state.wake_at');

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '1 minute');
SELECT is(ordertimeout.plan_sleep(interval '1 hour'), ordertimeout.next_due(), 'a timer sooner than max_sleep: its moment');

SELECT throws_ok($$SELECT ordertimeout.plan_sleep(interval '-1 second')$$, 'OT141', NULL, 'negative: OT141');
SELECT throws_ok($$SELECT ordertimeout.plan_sleep(interval '61 minutes')$$, 'OT141', NULL, 'more than 1 hour: OT141');
SELECT throws_ok($$SELECT ordertimeout.plan_sleep(NULL)$$, 'OT100', NULL, 'NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
