-- Payment methods have their own windows, and the gateway's expiry is
-- returned (gateway_expire_at) so the shop gives the gateway that exact
-- moment; ordertimeout never cancels before it plus grace. A bank-transfer
-- order is not cancelled at the card window; a card order is. A cancelled
-- bank transfer sends no gateway close. A per-call window still wins.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(15);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.configure(grace => interval '1 minute');
SELECT ordertimeout.create_order('card', '[{"sku":"A","qty":1}]', '5 minutes');
SELECT ordertimeout.create_order('bank', '[{"sku":"A","qty":1}]', '5 minutes', '{"method":"bank_transfer"}');
SELECT ordertimeout.create_order('qr', '[{"sku":"A","qty":1}]', '5 minutes');
SELECT ordertimeout.create_order('own', '[{"sku":"A","qty":1}]', '5 minutes', '{"method":"qr"}');

SELECT is((SELECT payment_method FROM ordertimeout.order_info('bank')), 'bank_transfer', 'create_order takes the method');
SELECT gateway_expire_at AS card_exp FROM ordertimeout.begin_payment('card', 'p-card', method => 'card') \gset
SELECT gateway_expire_at AS bank_exp FROM ordertimeout.begin_payment('bank', 'p-bank') \gset
SELECT gateway_expire_at AS qr_exp FROM ordertimeout.begin_payment('qr', 'p-qr', interval '10 minutes', 'qr') \gset
SELECT is(:'card_exp'::timestamptz - (SELECT started_at FROM ordertimeout.payments WHERE payment_id = 'p-card'),
    interval '15 minutes', 'card: the gateway expires the payment 15 minutes after it began');
SELECT is(:'bank_exp'::timestamptz - (SELECT started_at FROM ordertimeout.payments WHERE payment_id = 'p-bank'),
    interval '3 days', 'bank_transfer (the order''s method): 3 days');
SELECT is(:'qr_exp'::timestamptz - (SELECT started_at FROM ordertimeout.payments WHERE payment_id = 'p-qr'),
    interval '10 minutes', 'a per-call window wins over the method''s 2 hours');
SELECT is((SELECT payment_method FROM ordertimeout.order_info('qr')), 'qr', 'the order takes the method begun');
SELECT ok((SELECT bool_and(cancel_at >= gateway_expire_at + interval '1 minute' AND paying_until = gateway_expire_at + interval '1 minute')
             FROM ordertimeout.orders WHERE gateway_expire_at IS NOT NULL),
    'cancel_at and the payment check are never before gateway_expire_at + grace');

-- The buyers give up at once (the gateway says failed): back to PENDING.
SELECT ordertimeout.fail_payment('card', 'p-card');
SELECT ordertimeout.fail_payment('bank', 'p-bank');
-- 20 minutes later: past the card window, far from the bank transfer's.
UPDATE ordertimeout.orders SET created_at = created_at - interval '20 minutes', expire_at = expire_at - interval '20 minutes',
       cancel_at = cancel_at - interval '20 minutes', gateway_expire_at = gateway_expire_at - interval '20 minutes'
 WHERE order_id IN ('card', 'bank');
UPDATE public.river_job SET scheduled_at = scheduled_at - interval '20 minutes'
 WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' IN ('card', 'bank');
SELECT ordertimeout.configure(precheck => 'never');
SELECT results_eq($$SELECT cancelled FROM ordertimeout.sweep_due()$$, $$VALUES (1)$$, 'one order due');
SELECT results_eq($$SELECT order_id, status::text FROM ordertimeout.orders WHERE order_id IN ('card', 'bank') ORDER BY 1$$,
    $$VALUES ('bank', 'PENDING'), ('card', 'CANCELLED')$$,
    'the card order is cancelled at the card window; the bank transfer is not');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE kind = 'ordertimeout_gateway_close'), 1,
    'the card order''s payment is closed at the gateway');

SELECT ordertimeout.cancel_order('bank', 'shop cancelled');
SELECT is((SELECT count(*)::integer FROM public.river_job WHERE kind = 'ordertimeout_gateway_close'
             AND args ->> 'order_id' = 'bank'), 0, 'a bank transfer has nothing to close at the gateway');
SELECT ordertimeout.confirm_payment('bank', 'p-bank-late');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE order_id = 'bank'), 'refund',
    'late money for a bank transfer is refunded by the method''s policy');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE order_id = 'card' UNION ALL SELECT 'none' LIMIT 1),
    'none', '(no conflict on the card order)');

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.begin_payment('own', 'p-own', method => 'cheque')$$, 'OT160', NULL,
    'an unknown method: OT160');
SELECT throws_ok($$SELECT ordertimeout.create_order('x', '[{"sku":"A","qty":1}]', NULL, '{"method":"paypal"}')$$, 'OT160', NULL,
    'an unknown method in options: OT160');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
