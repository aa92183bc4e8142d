-- configure(paused => true) stops every timeout cancel: the timers stay,
-- sweep_due claims nothing, cancel_checked refuses (OT137), plan_sleep sleeps
-- the longest; payments go on. configure(paused => false) resumes: the next
-- sweep cancels the backlog, with honest lateness and events that say the
-- order waited for the pause.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(15);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]') FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SET LOCAL ordertimeout.actor = 'ops:anna';
SELECT results_eq($$SELECT paused, paused_by FROM ordertimeout.configure(paused => true)$$,
    $$VALUES (true, 'ops:anna')$$, 'paused, and who paused is recorded');
SELECT ok((SELECT paused_at IS NOT NULL FROM ordertimeout.settings), 'with when');
SELECT is((SELECT paused FROM ordertimeout.sweep_stats), true, 'sweep_stats says paused');
SELECT test.make_due('o1');
SELECT test.make_due('o2');

SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (0, 0)$$,
    'paused: sweep_due claims nothing');
SELECT is((SELECT count(*)::integer FROM ordertimeout.orders WHERE status = 'PENDING'), 3, 'nothing is cancelled');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE queue = 'ordertimeout_expire' AND state = 'available'), 3,
    'the timers stay');
SELECT throws_ok($$SELECT ordertimeout.cancel_checked('o2', (SELECT deadline_version FROM ordertimeout.orders WHERE order_id = 'o2'))$$,
    'OT137', NULL, 'cancel_checked refuses while paused: OT137');
SELECT ok(ordertimeout.plan_sleep(interval '1 second') > clock_timestamp() + interval '900 milliseconds',
    'plan_sleep does not wake for due timers while paused');
SELECT is(ordertimeout.confirm_payment('o3', 'p3'), 'paid', 'payments go on');
SELECT ok(ordertimeout.cancel_order('o2', 'buyer asked'), 'a cancel the buyer asks for goes on');

-- Make the pause look a minute long, then resume.
UPDATE ordertimeout.settings SET paused_at = paused_at - interval '2 minutes';
SELECT results_eq($$SELECT paused, resumed_at IS NOT NULL FROM ordertimeout.configure(paused => false)$$,
    $$VALUES (false, true)$$, 'resumed');
SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'the backlog is cancelled');
SELECT ok((SELECT lateness >= interval '1 minute' FROM ordertimeout.events WHERE order_id = 'o1' AND to_status = 'CANCELLED'),
    'the lateness includes the pause');
SELECT results_eq(
    $$SELECT (detail ->> 'waited_for_pause')::boolean, detail ? 'resumed_at' FROM ordertimeout.events
       WHERE order_id = 'o1' AND to_status = 'CANCELLED'$$,
    $$VALUES (true, true)$$, 'the event says the order waited for the pause');
SELECT is((SELECT detail FROM ordertimeout.events WHERE order_id = 'o2' AND to_status = 'CANCELLED'),
    '{"reason": "buyer asked"}'::jsonb, 'a requested cancel says nothing of a pause');

SELECT * FROM finish();
ROLLBACK;
