-- An order handed to a gateway check whose check job River lost (deleted,
-- or finalized as discarded/cancelled) is not left PENDING forever: at most
-- every 10 seconds sweep_due catches it like a lost timer and, as its policy
-- still wants the gateway asked, queues a new check. With policy never it is
-- cancelled with cause sweep.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"precheck": "always"}');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"precheck": "always"}');
SELECT test.make_due('o1');
SELECT test.make_due('o2');
SELECT results_eq($$SELECT claimed, cancelled, checks FROM ordertimeout.sweep_due()$$, $$VALUES (2, 0, 2)$$,
    'both orders are handed to a gateway check');

-- o1's check job is deleted, o2's is discarded by River.
DELETE FROM public.river_job WHERE kind = 'ordertimeout_precancel_check' AND args ->> 'order_id' = 'o1';
UPDATE public.river_job SET state = 'discarded', finalized_at = now()
WHERE kind = 'ordertimeout_precancel_check' AND args ->> 'order_id' = 'o2';

UPDATE ordertimeout.rescue_state SET rescued_at = clock_timestamp();
SELECT results_eq($$SELECT claimed, caught_by_sweep FROM ordertimeout.sweep_due()$$, $$VALUES (0, 0)$$,
    'within 10 seconds of the last rescue, nothing is looked at');

UPDATE ordertimeout.rescue_state SET rescued_at = '-infinity';
SELECT results_eq($$SELECT claimed, cancelled, caught_by_sweep, checks FROM ordertimeout.sweep_due()$$,
    $$VALUES (2, 0, 2, 2)$$,
    'then both are caught and get a new check');
SELECT is((SELECT count(*)::integer FROM ordertimeout.orders AS o
            JOIN public.river_job AS r ON r.id = o.check_job_id AND r.finalized_at IS NULL
           WHERE o.status = 'PENDING'),
    2, 'each order points to a live check job again');
SELECT cmp_ok((SELECT rescued_at FROM ordertimeout.rescue_state), '>', '-infinity'::timestamptz,
    'the rescue records when it ran');

-- A rescue recorded in the future (the clock was set back) is not a recent
-- one: the next sweep rescues, rather than waiting for the clock.
DELETE FROM public.river_job WHERE kind = 'ordertimeout_precancel_check' AND args ->> 'order_id' = 'o2';
UPDATE ordertimeout.rescue_state SET rescued_at = clock_timestamp() + interval '1 hour';
SELECT results_eq($$SELECT caught_by_sweep, checks FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'a rescue recorded an hour ahead: the lost check is caught at once');
SELECT cmp_ok((SELECT rescued_at FROM ordertimeout.rescue_state), '<=', clock_timestamp(),
    'and the rescue is recorded at the database''s now');

-- With policy never, a lost check ends in a cancel.
UPDATE ordertimeout.orders SET precheck = 'never' WHERE order_id = 'o1';
DELETE FROM public.river_job WHERE kind = 'ordertimeout_precancel_check' AND args ->> 'order_id' = 'o1';
UPDATE ordertimeout.rescue_state SET rescued_at = '-infinity';
SELECT results_eq($$SELECT cancelled, caught_by_sweep FROM ordertimeout.sweep_due()$$, $$VALUES (1, 1)$$,
    'policy never: the order is cancelled');
SELECT results_eq($$SELECT status::text, cancel_cause::text FROM ordertimeout.orders WHERE order_id = 'o1'$$,
    $$VALUES ('CANCELLED', 'sweep')$$, 'with cause sweep');
SELECT is((SELECT reserved::bigint FROM ordertimeout.stock WHERE sku = 'A'), 1::bigint, 'and its stock released');

SELECT * FROM finish();
ROLLBACK;
