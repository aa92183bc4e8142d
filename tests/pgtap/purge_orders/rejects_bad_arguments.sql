-- purge_orders' errors: OT100 NULL, OT152 closed_older_than and OT153
-- paid_older_than outside 0..100 years or with a negative part (checked
-- before any arithmetic: no 22008), OT140 max outside 1..100000. A failed
-- call writes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(18);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.close_cancelled(interval '0');
UPDATE ordertimeout.orders SET closed_at = closed_at - interval '1 day';
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.purge_orders(NULL)$$, 'OT100', NULL, 'closed_older_than NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '-1 second')$$, 'OT152', NULL, 'negative: OT152');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '101 years')$$, 'OT152', NULL, '101 years: OT152');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '178000000 years')$$, 'OT152', NULL,
    'the largest interval: OT152, not 22008');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '1 mon -30 days')$$, 'OT152', NULL,
    'a negative part (compares as 0, may reach into the future): OT152');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '1 day -1 hour')$$, 'OT152', NULL,
    'a negative time part: OT152');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '1 day', 0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '1 day', 100001)$$, 'OT140', NULL, 'max 100001: OT140');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '1 day', NULL)$$, 'OT100', NULL, 'max NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '0', 10, interval '-1 day')$$, 'OT153', NULL,
    'paid_older_than negative: OT153');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '0', 10, interval '178000000 years')$$, 'OT153', NULL,
    'paid_older_than the largest interval: OT153');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '0', 10, interval '2 years -800 days')$$, 'OT153', NULL,
    'paid_older_than with a negative part: OT153');
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '-1 day', 10, interval '-1 day')$$, 'OT152', NULL,
    'closed_older_than is checked first');
SELECT is(test.snapshot(), :'before'::jsonb, 'the failed calls wrote nothing');

SELECT is(ordertimeout.purge_orders(interval '100 years'), 0, '100 years is allowed');
SELECT is(ordertimeout.purge_orders(interval '2 days', 1, interval '100 years'), 0, 'paid 100 years is allowed');
SELECT is(ordertimeout.purge_orders(interval '1 mon 2 days 03:00'), 0, 'months, days and time together are allowed');
SELECT is(ordertimeout.purge_orders(interval '0'), 1, '0 purges every CLOSED order');

SELECT * FROM finish();
ROLLBACK;
