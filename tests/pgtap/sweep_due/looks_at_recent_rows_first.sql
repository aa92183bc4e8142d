-- A sweep looks at the timer rows (and lost timers) due in the last 2
-- seconds only, unless the last sweep that looked at every due row
-- (scan_state) is a second old or more, lies in the future, came back full,
-- or is not recorded (ordertimeout._scan_from), and when the window holds
-- no timer row: a call that claims nothing means nothing it could take is
-- due. Deleted timer rows leave index entries before the first live due row
-- until river_job is vacuumed; this is what spares each sweep reading them
-- all. plan_sleep plans a sleep longer than a second from every timer row.
-- (A full look
-- that leaves an old order to another transaction is not recorded: that
-- needs a second session, tests/race TestSweepLooksAgainAfterDeferringAnOldOrder.)
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(26);

-- test.make_due, without forgetting the last full look (as a deadline that
-- simply passed would not).
CREATE FUNCTION test.due_since(order_id text, overdue interval)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_scanned timestamptz := (SELECT s.scanned_at FROM ordertimeout.scan_state AS s);
BEGIN
    PERFORM test.make_due(due_since.order_id, due_since.overdue);
    UPDATE ordertimeout.scan_state SET scanned_at = v_scanned;
END
$$;

-- What a sweep that looked at every due row a moment ago leaves.
CREATE FUNCTION test.just_scanned()
RETURNS void
LANGUAGE sql
AS $$
    UPDATE ordertimeout.scan_state SET scanned_at = clock_timestamp(), backlog = false;
$$;

-- A second later.
CREATE FUNCTION test.a_second_later()
RETURNS void
LANGUAGE sql
AS $$
    UPDATE ordertimeout.scan_state SET scanned_at = scanned_at - interval '1 second';
$$;

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order(o, '[{"sku": "A", "qty": 1}]')
FROM unnest(ARRAY['first', 'old', 'recent', 'lost', 'alone', 'b1', 'b2', 'b3', 'b4', 'w1', 'w2', 'w3',
                  'l1', 'l2', 'l3', 'idle', 'ahead', 'crash']) AS o;

-- 1. Nothing recorded: every due row, and the look is recorded.
SELECT test.make_due('first', interval '1 minute');
SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'with nothing recorded, a sweep finds a row due a minute ago');
SELECT ok((SELECT s.scanned_at > clock_timestamp() - interval '1 second' AND NOT s.backlog FROM ordertimeout.scan_state AS s),
    'and records that it looked at every due row, with no backlog');

-- 2. Right after a full look: the last 2 seconds only, then every row a
-- second later.
SELECT test.due_since('old', interval '1 minute'), test.due_since('lost', interval '1 minute'),
       test.due_since('recent', interval '500 milliseconds');
DELETE FROM public.river_job WHERE args ->> 'order_id' = 'lost';
SELECT test.just_scanned();
SELECT results_eq($$SELECT claimed, cancelled, caught_by_sweep FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1, 0)$$,
    'right after a full look, a sweep takes the row due in the last 2 seconds');
SELECT results_eq($$SELECT order_id, status::text FROM ordertimeout.orders WHERE order_id IN ('old', 'recent', 'lost') ORDER BY 1$$,
    $$VALUES ('lost', 'PENDING'), ('old', 'PENDING'), ('recent', 'CANCELLED')$$,
    'and leaves the row due a minute ago, and the lost timer, to the next full look');
SELECT test.a_second_later();
SELECT results_eq($$SELECT claimed, cancelled, caught_by_sweep FROM ordertimeout.sweep_due()$$, $$VALUES (2, 2, 1)$$,
    'a second later, a sweep looks at every due row: the old one and the lost timer');
SELECT ok((SELECT s.scanned_at > clock_timestamp() - interval '1 second' FROM ordertimeout.scan_state AS s),
    'and records its look');

-- 3. The last 2 seconds hold no timer row: the sweep looks at every due
-- row, so that claiming nothing means nothing is due.
SELECT test.due_since('alone', interval '1 minute');
SELECT test.just_scanned();
SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'when the last 2 seconds hold nothing, a sweep right after a full look looks at every due row');
SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (0, 0)$$,
    'and the next finds nothing: nothing is due');

-- 4. A full batch is a backlog: the next sweep looks at every due row.
SELECT test.make_due(o, interval '1 minute') FROM unnest(ARRAY['b1', 'b2', 'b3']) AS o;
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due(2)$$, $$VALUES (2)$$, 'a full batch');
SELECT ok((SELECT s.backlog FROM ordertimeout.scan_state AS s), 'is recorded as a backlog');
SELECT test.due_since('b4', interval '500 milliseconds');
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due(2)$$, $$VALUES (2)$$,
    'after a backlog, a sweep takes the old row too, not only the one of the last 2 seconds');
SELECT is_empty($$SELECT order_id FROM ordertimeout.orders WHERE order_id LIKE 'b_' AND status = 'PENDING'$$,
    'the backlog is drained');
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due(2)$$, $$VALUES (0)$$, 'a sweep that comes back short');
SELECT ok((SELECT NOT s.backlog FROM ordertimeout.scan_state AS s), 'ends the backlog');

-- 4b. A sweep of the last 2 seconds that comes back full is a backlog too.
SELECT test.due_since(o, interval '500 milliseconds') FROM unnest(ARRAY['w1', 'w2', 'w3']) AS o;
SELECT test.just_scanned();
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due(2)$$, $$VALUES (2)$$,
    'a full batch of the last 2 seconds');
SELECT ok((SELECT s.backlog FROM ordertimeout.scan_state AS s), 'is recorded as a backlog');
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due(2)$$, $$VALUES (1)$$, 'and the next sweep takes the rest');

-- 4c. A batch filled by lost timers is a backlog too: without it, the
-- next sweeps look at the last 2 seconds and a mass loss of timer rows
-- drains at one batch a second.
SELECT test.make_due(o, interval '1 minute') FROM unnest(ARRAY['l1', 'l2', 'l3']) AS o;
DELETE FROM public.river_job WHERE args ->> 'order_id' IN ('l1', 'l2', 'l3');
SELECT results_eq($$SELECT claimed, caught_by_sweep FROM ordertimeout.sweep_due(2)$$, $$VALUES (2, 2)$$,
    'a batch of lost timers');
SELECT ok((SELECT s.backlog FROM ordertimeout.scan_state AS s), 'is recorded as a backlog');
SELECT results_eq($$SELECT claimed, caught_by_sweep FROM ordertimeout.sweep_due(2)$$, $$VALUES (1, 1)$$,
    'and the next sweep, at once, catches the third');

-- 5. plan_sleep: a sleep longer than a second is planned from every timer
-- row, so a row due before the window wakes the sweepers now, and their
-- sweep (its window empty) takes it.
SELECT test.due_since('idle', interval '1 minute');
SELECT test.just_scanned();
SELECT s.scanned_at AS scanned FROM ordertimeout.scan_state AS s \gset
SELECT ok(ordertimeout.plan_sleep(interval '1 hour') <= clock_timestamp(),
    'with only a row due a minute ago, right after a full look, plan_sleep wakes the sweepers now');
SELECT is((SELECT s.scanned_at FROM ordertimeout.scan_state AS s), :'scanned'::timestamptz,
    'and leaves the record as it was');
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due()$$, $$VALUES (1)$$, 'and they take the row');

-- 6. A full look recorded in the future (the clock was set back) does not
-- keep sweeps to the window until the clock catches up.
SELECT test.due_since('ahead', interval '1 minute');
UPDATE ordertimeout.scan_state SET scanned_at = clock_timestamp() + interval '1 hour', backlog = false;
SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'a full look recorded an hour ahead: the sweep looks at every due row');

-- 7. After a crash (scan_state empty): every due row, and the sweep writes
-- the row again.
SELECT test.due_since('crash', interval '1 minute');
DELETE FROM ordertimeout.scan_state;
SELECT results_eq($$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'with scan_state empty, a sweep looks at every due row');
SELECT ok((SELECT count(*) = 1 AND bool_and(s.scanned_at > clock_timestamp() - interval '1 second')
             FROM ordertimeout.scan_state AS s),
    'and writes its record again');

SELECT * FROM finish();
ROLLBACK;
