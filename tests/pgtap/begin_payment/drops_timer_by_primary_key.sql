-- begin_payment drops the order's timer row and confirm_payment its payment
-- check through River's primary key: River's fetch index (state, queue,
-- priority, scheduled_at, id) is not scanned for them. Their generic plan
-- used to take that index, with state as its only bound, when it was made
-- while river_job had no statistics and a few pages (about 500 rows on a
-- fresh database): every available job row was then read to find one, twice
-- per paid order, for as long as the session kept the plan. The plans are
-- made again (DISCARD PLANS) at each of 12 sizes of the table, 100 orders
-- apart, so that the size where that happened is among them.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10000);
SELECT pg_stat_get_xact_numscans('public.river_job_prioritized_fetching_index'::regclass) AS fetch_scans \gset
SELECT format($$SELECT count(ordertimeout.create_order('o' || g, '[{"sku":"A","qty":1}]', '5 minutes'))
                  FROM generate_series(%1$s * 100 + 1, %1$s * 100 + 100) AS g$$, step),
       'DISCARD PLANS',
       format($$SELECT count(ordertimeout.begin_payment('o' || g, 'p' || g)) FROM generate_series(%1$s * 100 + 1, %1$s * 100 + 2) AS g$$, step),
       format($$SELECT count(ordertimeout.confirm_payment('o' || g, 'p' || g)) FROM generate_series(%1$s * 100 + 1, %1$s * 100 + 2) AS g$$, step)
FROM generate_series(0, 11) AS step \gexec

SELECT is(pg_stat_get_xact_numscans('public.river_job_prioritized_fetching_index'::regclass), :fetch_scans::bigint,
    '24 begins and 24 confirms, planned at 12 sizes of River''s table, do not scan its fetch index');
SELECT is((SELECT count(*)::integer FROM public.river_job
            WHERE queue = 'ordertimeout_expire'
              AND args ->> 'order_id' IN (SELECT 'o' || (s * 100 + g) FROM generate_series(0, 11) AS s, generate_series(1, 2) AS g)),
    0, 'the paid orders'' timer rows are gone');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE kind = 'ordertimeout_payment_check'),
    0, 'and their payment checks');

SELECT * FROM finish();
ROLLBACK;
