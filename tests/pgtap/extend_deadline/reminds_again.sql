-- With webhooks and remind_before, the expiring-soon reminder is of a
-- deadline version: the webhook worker sends it only while the order is
-- PENDING at that version. extend_deadline and a failed payment's return to
-- PENDING give the order a new version, and write the reminder of it. A
-- review found an extended order never reminded: its only reminder, of
-- version 1, was moot.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.configure(webhooks => true, remind_before => interval '5 minutes');
SELECT ordertimeout.create_order('r1', '[{"sku": "A", "qty": 1}]', interval '10 minutes');
SELECT ordertimeout.extend_deadline('r1', interval '1 hour');

SELECT results_eq(
    $$SELECT (args ->> 'version')::int, scheduled_at = (SELECT expire_at - interval '5 minutes' FROM ordertimeout.orders WHERE order_id = 'r1')
        FROM public.river_job WHERE kind = 'ordertimeout_webhook' AND args ->> 'order_id' = 'r1' ORDER BY 1$$,
    $$VALUES (1, false), (2, true)$$,
    'extended: a reminder of version 2 at the new expire_at - remind_before');

SELECT ordertimeout.begin_payment('r1', 'pay-1');
SELECT ordertimeout.fail_payment('r1', 'pay-1');
SELECT is((SELECT status || ' ' || deadline_version FROM ordertimeout.orders WHERE order_id = 'r1'), 'PENDING 4',
    'the failed payment brings it back to PENDING at version 4');
SELECT results_eq(
    $$SELECT (args ->> 'version')::int FROM public.river_job
       WHERE kind = 'ordertimeout_webhook' AND args ->> 'order_id' = 'r1' AND args ? 'reminder' ORDER BY 1$$,
    $$VALUES (1), (2), (4)$$,
    'and it gets the reminder of version 4');

-- None when the reminder's moment has passed, and none with webhooks off.
SELECT ordertimeout.create_order('r2', '[{"sku": "A", "qty": 1}]', interval '1 minute');
SELECT ordertimeout.extend_deadline('r2', interval '1 minute');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE args ->> 'order_id' = 'r2' AND args ? 'reminder'$$,
    'an expiry closer than remind_before gets no reminder');
SELECT ordertimeout.configure(webhooks => false);
SELECT ordertimeout.create_order('r3', '[{"sku": "A", "qty": 1}]', interval '20 minutes');
SELECT ordertimeout.extend_deadline('r3', interval '1 hour');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE args ->> 'order_id' = 'r3' AND kind = 'ordertimeout_webhook'$$,
    'webhooks off: no reminder');

SELECT * FROM finish();
ROLLBACK;
