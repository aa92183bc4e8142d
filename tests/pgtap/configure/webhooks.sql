-- With webhooks on, state changes queue a webhook job per event, and with
-- remind_before an expiring-soon reminder is queued at expire_at -
-- remind_before; with webhooks off (the default) nothing is queued. Both go
-- to queue ordertimeout_webhook, apart from the gateway jobs.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('off', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('off', 'p0');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE kind = 'ordertimeout_webhook'$$, 'webhooks off: no webhook job');

SELECT ordertimeout.configure(webhooks => true, remind_before => interval '5 minutes');
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '20 minutes');
SELECT results_eq(
    $$SELECT queue, args, scheduled_at = (SELECT expire_at - interval '5 minutes' FROM ordertimeout.orders WHERE order_id = 'o1')
        FROM public.river_job WHERE kind = 'ordertimeout_webhook'$$,
    $$VALUES ('ordertimeout_webhook', '{"order_id": "o1", "reminder": "expiring_soon", "version": 1}'::jsonb, true)$$,
    'a reminder at expire_at - remind_before');

SELECT ordertimeout.create_order('short', '[{"sku": "A", "qty": 1}]', interval '3 minutes');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE args ->> 'order_id' = 'short' AND kind = 'ordertimeout_webhook'$$,
    'no reminder when the timeout is shorter than remind_before');

SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT results_eq(
    $$SELECT (r.args ->> 'event_id')::bigint FROM public.river_job AS r
       WHERE r.kind = 'ordertimeout_webhook' AND r.queue = 'ordertimeout_webhook' AND r.args ? 'event_id'$$,
    $$SELECT e.event_id FROM ordertimeout.events AS e WHERE e.order_id = 'o1' AND e.to_status = 'PAID'$$,
    'the payment queues a webhook for its event');

SELECT ordertimeout.configure(remind_before => interval '0');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', interval '20 minutes');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE args ->> 'order_id' = 'o2' AND kind = 'ordertimeout_webhook'$$,
    'remind_before 0: no reminder');

SELECT * FROM finish();
ROLLBACK;
