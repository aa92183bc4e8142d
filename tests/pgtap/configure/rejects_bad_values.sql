-- configure raises OT145 for each out-of-range setting, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.configure(default_timeout => interval '0')$$, 'OT145', NULL, 'default_timeout 0: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(default_timeout => interval '31 days')$$, 'OT145', NULL, 'default_timeout 31 days: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => interval '-1 second')$$, 'OT145', NULL, 'negative grace: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => interval '25 hours')$$, 'OT145', NULL, 'grace over 1 day: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(paying_window => interval '0')$$, 'OT145', NULL, 'paying_window 0: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(paying_window => interval '31 days')$$, 'OT145', NULL, 'paying_window 31 days: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(precheck => 'sometimes')$$, 'OT145', NULL, 'unknown precheck: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(late_payment => 'ignore')$$, 'OT145', NULL, 'unknown late_payment: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(remind_before => interval '-1 minute')$$, 'OT145', NULL, 'negative remind_before: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => interval '1 minute', precheck => 'sometimes')$$, 'OT145', NULL,
    'one bad value among good ones: OT145');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written (not even the good value)');

SELECT * FROM finish();
ROLLBACK;
