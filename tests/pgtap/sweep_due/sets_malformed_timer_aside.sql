-- One malformed timer row must not stop every sweep: a row of queue
-- ordertimeout_expire whose args are not {"order_id": text, "version":
-- integer} is discarded with the reason recorded, counted in
-- sweep_stats.malformed_timers, and the rest of the batch is swept. Issue 9
-- reproduced: args {"order_id":"nope","version":"x"} made sweep_due fail
-- with 22P02 forever.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]');
SELECT test.make_due('o1');
INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
VALUES ('ordertimeout_expire', '{"order_id":"nope","version":"x"}', 'ordertimeout_expire', 'available', now() - interval '1 hour'),
       ('ordertimeout_expire', '{"order_id":1,"version":1}', 'ordertimeout_expire', 'available', now() - interval '1 hour'),
       ('ordertimeout_expire', '{"order_id":"o1","version":99999999999}', 'ordertimeout_expire', 'available', now() - interval '1 hour');

SELECT lives_ok($$SELECT * FROM ordertimeout.preview_due()$$, 'preview_due does not fail on them');
SELECT results_eq($$SELECT claimed, cancelled, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (4, 1, 3)$$, 'the sweep goes on: the order is cancelled, the three malformed rows are moot');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'o1'), 'CANCELLED', 'the due order is cancelled');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE queue = 'ordertimeout_expire' AND state = 'discarded'
             AND finalized_at IS NOT NULL AND errors[1] ->> 'error' LIKE 'Malformed ordertimeout timer%'), 3,
    'each malformed row is discarded with the reason recorded');
SELECT is((SELECT malformed_timers FROM ordertimeout.sweep_stats), 3::bigint, 'sweep_stats counts them');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE queue = 'ordertimeout_expire' AND state = 'available'), 0,
    'nothing is left to claim');
SELECT results_eq($$SELECT claimed FROM ordertimeout.sweep_due()$$, $$VALUES (0)$$, 'the next sweep finds nothing');

SELECT * FROM finish();
ROLLBACK;
