-- Migration 000057, from a hostile review of reconciliation:
-- - a transaction whose time is outside the period is refused with OT171,
--   naming its line, and nothing is written: a file of another period
--   (yesterday's, run again for today) moved the watermark past the
--   payments of the day, which were never read;
-- - a payment unknown here that the gateway took before the order was
--   created is other_order, not a lost callback of this order: an order id
--   purged and taken again was PAID by the earlier buyer's money;
-- - report_missing does not report a lost callback it confirmed itself;
-- - a transaction of a purged order says so.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(14);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT now() - interval '3 hours' AS t3, now() - interval '2 hours' AS t2, now() - interval '1 hour' AS t1 \gset

-- Outside the period, on either side: OT171 with the line; nothing written.
SELECT ordertimeout.create_order('live', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
UPDATE ordertimeout.orders SET created_at = now() - interval '4 hours' WHERE order_id = 'live';
SELECT test.snapshot() AS before \gset
SELECT throws_ok(format($$SELECT * FROM ordertimeout.reconcile_payments(%L, %L, %L, false, 'csv:psp')$$,
    jsonb_build_array(jsonb_build_object('line', 7, 'payment_id', 'p-live', 'order_id', 'live', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t3'::timestamptz - interval '1 second')), :'t3', :'t2'),
    'OT171', NULL, 'a transaction before the period: OT171');
SELECT throws_like(format($$SELECT * FROM ordertimeout.reconcile_payments(%L, %L, %L)$$,
    jsonb_build_array(jsonb_build_object('line', 7, 'payment_id', 'p-live', 'order_id', 'live', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t1')), :'t3', :'t2'),
    'line 7: at % is outside the period % to %: is this the file of another period?',
    'after it: OT171, naming the line');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written, no watermark');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
    jsonb_build_array(jsonb_build_object('payment_id', 'p-live', 'order_id', 'live', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t2')), :'t3', :'t2', false, 'csv:psp')),
    'confirmed', 'at the end of the period is in it (a run cut at MaxRows ends its period at its last transaction)');

-- Taken before the order was created: another order's money.
SELECT ordertimeout.create_order('reused', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT test.snapshot() AS before \gset
SELECT results_eq(format($$SELECT outcome, detail ~ '^paid at the gateway at .*, before order reused here was created'
                          FROM ordertimeout.reconcile_payments(%L, %L, %L)$$,
    jsonb_build_array(jsonb_build_object('payment_id', 'p-old', 'order_id', 'reused', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t1')), :'t3', now()),
    $$VALUES ('other_order', true)$$, 'a payment taken before the order existed is other_order');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'reused'), 'PENDING', 'the order is not paid with it');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

-- A payment begun for this order is its own, whatever the gateway's clock.
SELECT ordertimeout.begin_payment('reused', 'p-own');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
    jsonb_build_array(jsonb_build_object('payment_id', 'p-own', 'order_id', 'reused', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t1')), :'t3', now())),
    'confirmed', 'a payment begun here is confirmed even when the gateway dates it earlier');

-- report_missing leaves out what reconciliation itself confirmed ('live'
-- above, confirmed now, listed by the gateway in an earlier period).
SELECT is((SELECT count(*) FROM ordertimeout.reconcile_payments('[]', now() - interval '1 minute', now() + interval '1 minute', true)
            WHERE payment_id = 'p-live'), 0::bigint, 'a lost callback reconciliation confirmed is not missing at the gateway');
SELECT is((SELECT count(*) FROM ordertimeout.reconcile_payments('[]', now() - interval '1 minute', now() + interval '1 minute', true)
            WHERE payment_id = 'p-own'), 0::bigint, 'nor is one whose PAID event came from reconciliation after a begin');

-- A late payment reconciliation found and the policy reinstated since is
-- not missing at the gateway either (its PAID event's cause is conflict).
SELECT ordertimeout.create_order('rc-late', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
UPDATE ordertimeout.orders SET created_at = now() - interval '4 hours' WHERE order_id = 'rc-late';
SELECT ordertimeout.cancel_order('rc-late');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
    jsonb_build_array(jsonb_build_object('payment_id', 'p-rc-late', 'order_id', 'rc-late', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t2')), :'t3', now())),
    'late_payment', 'a lost callback on a cancelled order: a late payment');
SELECT ordertimeout.resolve_conflict(conflict_id, 'reinstate') FROM ordertimeout.conflicts WHERE payment_id = 'p-rc-late';
SELECT is((SELECT count(*) FROM ordertimeout.reconcile_payments('[]', now() - interval '1 minute', now() + interval '1 minute', true)
            WHERE payment_id = 'p-rc-late'), 0::bigint, 'reinstated since: not missing at the gateway');

-- Clocks that differ by a few minutes: a payment dated up to 5 minutes
-- before its order's creation is still its own.
SELECT ordertimeout.create_order('skewed', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
    jsonb_build_array(jsonb_build_object('payment_id', 'p-skewed', 'order_id', 'skewed', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', now() - interval '4 minutes')), :'t3', now())),
    'confirmed', 'a gateway clock 4 minutes slow: a lost callback, confirmed');

-- A purged order's transaction names the purge.
INSERT INTO ordertimeout.purged_payments (payment_id, order_id, purged_at) VALUES ('p-gone', 'gone', now());
SELECT results_eq(format($$SELECT outcome, detail ~ 'order gone, which purge_orders deleted'
                          FROM ordertimeout.reconcile_payments(%L, %L, %L)$$,
    jsonb_build_array(jsonb_build_object('payment_id', 'p-gone', 'order_id', 'gone', 'amount', '10',
        'currency', 'EUR', 'status', 'paid', 'at', :'t1')), :'t3', now()),
    $$VALUES ('unknown_order', true)$$, 'a purged order''s transaction says it was purged');

SELECT * FROM finish();
ROLLBACK;
