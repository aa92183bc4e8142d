-- An interval with a negative part is refused wherever an interval is added
-- to a time: months, days and time are separate fields, and a day added to a
-- timestamptz is a calendar day (23 or 25 hours across a daylight-saving
-- change in the session's TimeZone), so '1 day -23:30' compares as 30
-- minutes but could move a deadline back or land before the start (a raw
-- 23514 from create_order). Before migration 000029 only purge_orders and
-- run_sweeper refused them. Intervals without a negative part still pass.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(15);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]', '1 day -23:30:00')$$, 'OT113',
    'timeout must have no negative part (a day is not always 24 hours), got 1 day -23:30:00',
    'create_order timeout: OT113, the field named');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p1', '1 day -23:30:00')$$, 'OT125', NULL,
    'begin_payment paying_window: OT125');
SELECT throws_ok($$SELECT ordertimeout.extend_deadline('o1', '1 day -23:30:00')$$, 'OT141', NULL,
    'extend_deadline by: OT141');
SELECT throws_ok($$SELECT ordertimeout.configure(default_timeout => '1 day -23:30:00')$$, 'OT145', NULL,
    'configure default_timeout: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => '1 day -23:30:00')$$, 'OT145', NULL, 'configure grace: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(paying_window => '1 day -23:30:00')$$, 'OT145', NULL,
    'configure paying_window: OT145');
SELECT throws_ok($$SELECT ordertimeout.configure(remind_before => '1 day -23:30:00')$$, 'OT145', NULL,
    'configure remind_before: OT145');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method('card', '1 day -23:30:00')$$, 'OT162', NULL,
    'put_payment_method paying_window: OT162');
SELECT throws_ok($$SELECT ordertimeout.close_cancelled('1 mon -30 days')$$, 'OT141',
    'older_than must be between 0 and 100 years, with no negative part, got 1 mon -30 days',
    'close_cancelled older_than: OT141');
SELECT throws_ok($$SELECT ordertimeout.plan_sleep('1 day -23:59:59')$$, 'OT141', NULL, 'plan_sleep max_sleep: OT141');
SELECT throws_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs('1 day -23:00:00')$$, 'OT141', NULL,
    'rescue_stuck_jobs running_for: OT141');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT is((ordertimeout.create_order('o3', '[{"sku":"A","qty":1}]', '1 day 00:30:00')).created, true,
    'a day and a half hour: accepted');
SELECT is((ordertimeout.extend_deadline('o3', '00:10:00')).status::text, 'PENDING', 'by 10 minutes: accepted');
SELECT is(ordertimeout.close_cancelled('1 mon 2 days'), 0, 'a month and two days: accepted');

SELECT * FROM finish();
ROLLBACK;
