-- Intervals are checked before any arithmetic and have no month part (a
-- month has no fixed length: '1 mon' compared as 30 days but added 31).
-- Issue 9 reproduced: create_order(..., '1 mon') was accepted.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(12);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]', '1 mon')$$, 'OT113', NULL,
    'timeout 1 mon: OT113');
SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]', '1 year')$$, 'OT113', NULL,
    'timeout 1 year: OT113');
SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]', '2000000000 days')$$, 'OT113', NULL,
    'timeout 2e9 days: OT113, no overflow');
SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]', '1 day -25 hours')$$, 'OT113', NULL,
    'a negative sum: OT113');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p1', '1 mon')$$, 'OT125', NULL, 'paying_window 1 mon: OT125');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', '1 mon')$$, 'OT141', NULL, 'by 1 mon: OT141');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', '2000000000 days')$$, 'OT141', NULL, 'by 2e9 days: OT141');
SELECT throws_ok($$SELECT ordertimeout.configure(default_timeout => '1 mon')$$, 'OT145', NULL, 'default_timeout 1 mon: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(paying_window => '1 mon')$$, 'OT145', NULL, 'paying_window 1 mon: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(remind_before => '300000 years')$$, 'OT145', NULL,
    'remind_before 300000 years: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => '-1 second')$$, 'OT145', NULL, 'negative grace: OT145');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
