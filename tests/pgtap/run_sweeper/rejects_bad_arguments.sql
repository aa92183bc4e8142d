-- run_sweeper's errors, raised before anything runs: OT100 NULL, OT140 max
-- outside 1..100000, OT150 max_sleep outside 1 ms..1 minute, OT151 duration
-- outside 0..1 hour (exclusive of 0), also for intervals with a negative
-- part. Inside a transaction block it cannot commit (2D000) and writes
-- nothing. Its sweeping is tested with real commits in tests/cron.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(16);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('o1');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$CALL ordertimeout.run_sweeper(0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(100001)$$, 'OT140', NULL, 'max 100001: OT140');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(NULL)$$, 'OT100', NULL, 'max NULL: OT100');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(max_sleep => NULL)$$, 'OT100', NULL, 'max_sleep NULL: OT100');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(max_sleep => interval '0')$$, 'OT150', NULL, 'max_sleep 0: OT150');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(max_sleep => interval '61 seconds')$$, 'OT150', NULL,
    'max_sleep 61 s: OT150');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(max_sleep => interval '1 day -23:59:30')$$, 'OT150', NULL,
    'max_sleep with a negative part: OT150');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(max_sleep => interval '178000000 years')$$, 'OT150', NULL,
    'max_sleep the largest interval: OT150');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '0')$$, 'OT151', NULL, 'duration 0: OT151');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '-1 second')$$, 'OT151', NULL,
    'duration negative: OT151');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '1 hour 1 second')$$, 'OT151', NULL,
    'duration over an hour: OT151');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '1 mon -29 days -23:59:59')$$, 'OT151', NULL,
    'duration with negative parts (compares as 1 second): OT151');
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '178000000 years')$$, 'OT151', NULL,
    'duration the largest interval: OT151');
SELECT is(test.snapshot(), :'before'::jsonb, 'the refused calls wrote nothing');

SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '1 second')$$, '2D000', NULL,
    'inside a transaction block it cannot commit: 2D000');
SELECT is(test.snapshot(), :'before'::jsonb, 'and its sweep is rolled back with it');

SELECT * FROM finish();
ROLLBACK;
