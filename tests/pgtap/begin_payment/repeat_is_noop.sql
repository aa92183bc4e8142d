-- begin_payment again with the same payment_id returns the order and writes
-- nothing; another payment_id on a PAYING order starts a second attempt.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT test.snapshot() AS before \gset

CREATE TEMP TABLE again AS SELECT * FROM ordertimeout.begin_payment('o1', 'p1');
SELECT is((SELECT (status, deadline_version) FROM again), ROW('PAYING'::text, 2), 'the repeat returns the PAYING order');
SELECT is(test.snapshot(), :'before'::jsonb, 'the repeat wrote nothing');

CREATE TEMP TABLE second AS SELECT * FROM ordertimeout.begin_payment('o1', 'p2');
SELECT is((SELECT (status, deadline_version) FROM second), ROW('PAYING'::text, 3),
    'a second payment_id: still PAYING, version bumped');
SELECT results_eq(
    $$SELECT payment_id, status::text FROM ordertimeout.payments ORDER BY payment_id$$,
    $$VALUES ('p1', 'started'), ('p2', 'started')$$,
    'two started attempts');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE kind = 'ordertimeout_payment_check'), 2,
    'one payment check per attempt');
SELECT is(test.timer_of('o1'), (SELECT max(id) FROM public.river_job WHERE kind = 'ordertimeout_payment_check'),
    'timer_job_id names the newest payment check');

SELECT * FROM finish();
ROLLBACK;
