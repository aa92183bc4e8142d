-- close_cancelled's errors: OT141 negative older_than, OT140 max out of
-- 1..100000, OT100 NULL.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

SELECT throws_ok($$SELECT ordertimeout.close_cancelled(interval '-1 second')$$, 'OT141', NULL, 'negative older_than: OT141');
SELECT throws_ok($$SELECT ordertimeout.close_cancelled(interval '1 day', 0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT ordertimeout.close_cancelled(interval '1 day', 100001)$$, 'OT140', NULL, 'max 100001: OT140');
SELECT throws_ok($$SELECT ordertimeout.close_cancelled(NULL)$$, 'OT100', NULL, 'older_than NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.close_cancelled(interval '1 day', NULL)$$, 'OT100', NULL, 'max NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
