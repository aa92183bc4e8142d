-- Each payment attempt keeps the method it was started with
-- (payments.method), and that method decides for it: the cancel closes the
-- order's payments at the gateway when any attempt's method closes, and late
-- money gets the policy of its own attempt's method. An attempt started
-- without a method takes the order's at that moment (window, close,
-- policy); with none, it has the defaults (close; the settings' policy),
-- also after a later attempt names one. Before migration 000059 both went by the
-- order's last method: a card payment started before a bank transfer stayed
-- open at the gateway after the cancel, and late money for a bank transfer
-- started before a card payment got the card's policy.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(25);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.configure(late_payment => 'reinstate', precheck => 'never');
SELECT ordertimeout.create_order(o, '[{"sku":"A","qty":1}]', '1 hour')
  FROM unnest(ARRAY['card-then-bank', 'bank-then-card', 'bank-only', 'unnamed-then-bank', 'no-begin']) AS o;

-- card-then-bank: the buyer gives up on the card, then picks a transfer.
SELECT ordertimeout.begin_payment('card-then-bank', 'ctb-card', method => 'card');
SELECT ordertimeout.fail_payment('card-then-bank', 'ctb-card');
SELECT ordertimeout.begin_payment('card-then-bank', 'ctb-bank', method => 'bank_transfer');
-- bank-then-card: the other way round.
SELECT ordertimeout.begin_payment('bank-then-card', 'btc-bank', method => 'bank_transfer');
SELECT ordertimeout.fail_payment('bank-then-card', 'btc-bank');
SELECT ordertimeout.begin_payment('bank-then-card', 'btc-card', method => 'card');
SELECT ordertimeout.fail_payment('bank-then-card', 'btc-card');
-- bank-only: two transfers.
SELECT ordertimeout.begin_payment('bank-only', 'bo-1', method => 'bank_transfer');
SELECT ordertimeout.fail_payment('bank-only', 'bo-1');
SELECT ordertimeout.begin_payment('bank-only', 'bo-2', method => 'bank_transfer');
-- unnamed-then-bank: the first attempt names no method (the order had none).
SELECT ordertimeout.begin_payment('unnamed-then-bank', 'utb-1');
SELECT ordertimeout.fail_payment('unnamed-then-bank', 'utb-1');
SELECT ordertimeout.begin_payment('unnamed-then-bank', 'utb-2', method => 'bank_transfer');

SELECT results_eq(
    $$SELECT payment_id, status, method FROM ordertimeout.order_payments('card-then-bank')$$,
    $$VALUES ('ctb-card', 'failed', 'card'), ('ctb-bank', 'started', 'bank_transfer')$$,
    'order_payments shows the method each attempt was started with');
SELECT is((SELECT payment_method FROM ordertimeout.order_info('card-then-bank')), 'bank_transfer',
    'the order keeps its last method');
SELECT is((SELECT method FROM ordertimeout.order_payments('unnamed-then-bank') WHERE payment_id = 'utb-1'), NULL,
    'an attempt started without a method has none');

-- The last attempts fail too (cancel_order leaves a PAYING order alone).
SELECT ordertimeout.fail_payment(o, p)
  FROM (VALUES ('card-then-bank', 'ctb-bank'), ('bank-only', 'bo-2'), ('unnamed-then-bank', 'utb-2')) AS f(o, p);
SELECT is(ordertimeout.cancel_order(o, 'shop cancelled'), true, 'cancelled: ' || o)
  FROM unnest(ARRAY['card-then-bank', 'bank-then-card', 'bank-only', 'unnamed-then-bank']) AS o;
SELECT results_eq(
    $$SELECT args ->> 'order_id' FROM public.river_job WHERE kind = 'ordertimeout_gateway_close'
       AND args ->> 'order_id' <> 'unnamed-then-bank' ORDER BY 1$$,
    $$VALUES ('bank-then-card'), ('card-then-bank')$$,
    'the cancel closes an order whose earlier attempt was a card payment, not one of transfers alone');
SELECT is((SELECT count(*)::integer FROM public.river_job
            WHERE kind = 'ordertimeout_gateway_close' AND args ->> 'order_id' = 'unnamed-then-bank'), 1,
    'an attempt started without a method has the defaults, which close, though the order''s method is now a transfer');

-- Late money for each attempt.
SELECT ordertimeout.confirm_payment('bank-then-card', 'btc-bank');
SELECT ordertimeout.confirm_payment('card-then-bank', 'ctb-card');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE payment_id = 'btc-bank'), 'refund',
    'a late transfer started before a card payment gets the transfer''s policy');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE payment_id = 'ctb-card'), 'reinstate',
    'a late card payment started before a transfer gets the card''s (the settings'')');
SELECT is((SELECT late_payment FROM ordertimeout.conflicts_to_resolve() WHERE payment_id = 'btc-bank'), 'refund',
    'the sidecar''s list says the same');
SELECT is((SELECT late_payment FROM ordertimeout.conflict_info(
             (SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'ctb-card'))), 'reinstate',
    'so does conflict_info');

-- Money confirmed without a begin goes by the order's method; money for an
-- attempt started without a method by the settings'.
SELECT ordertimeout.cancel_order('no-begin', 'shop cancelled');
UPDATE ordertimeout.orders SET payment_method = 'bank_transfer' WHERE order_id = 'no-begin';
SELECT ordertimeout.confirm_payment('no-begin', 'nb-1');
SELECT ordertimeout.confirm_payment('unnamed-then-bank', 'utb-1');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE payment_id = 'nb-1'), 'refund',
    'money confirmed without a begin gets the order''s method''s policy');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE payment_id = 'utb-1'), 'reinstate',
    'money for an attempt started without a method gets the settings'' policy, not the later transfer''s');
SELECT results_eq(
    $$SELECT payment_id, method FROM ordertimeout.order_payments('no-begin')$$,
    $$VALUES ('nb-1', 'bank_transfer')$$,
    'order_payments gives the order''s method for a payment confirmed without a begin');

-- An attempt begun before migration 000059 (method not known here) reads as
-- the order's method; a later attempt with another method pins it first.
SELECT ordertimeout.create_order('legacy', '[{"sku":"A","qty":1}]', '1 hour');
SELECT ordertimeout.begin_payment('legacy', 'lg-card', method => 'card');
SELECT ordertimeout.fail_payment('legacy', 'lg-card');
UPDATE ordertimeout.payments SET method = NULL, method_recorded = false WHERE payment_id = 'lg-card';
SELECT is((SELECT method FROM ordertimeout.order_payments('legacy')), 'card', 'a legacy attempt reads as the order''s method');
SELECT ordertimeout.begin_payment('legacy', 'lg-bank', method => 'bank_transfer');
SELECT results_eq(
    $$SELECT payment_id, method FROM ordertimeout.order_payments('legacy')$$,
    $$VALUES ('lg-card', 'card'), ('lg-bank', 'bank_transfer')$$,
    'a new attempt with another method pins the legacy attempt to the order''s method before it changes');
SELECT ordertimeout.fail_payment('legacy', 'lg-bank');
SELECT ordertimeout.cancel_order('legacy', 'shop cancelled');
SELECT is((SELECT count(*)::integer FROM public.river_job
            WHERE kind = 'ordertimeout_gateway_close' AND args ->> 'order_id' = 'legacy'), 1,
    'so its card payment is closed at the cancel');

-- An attempt started without a method after one that named it is of that
-- method, its window as the rest.
SELECT ordertimeout.create_order('named-then-unnamed', '[{"sku":"A","qty":1}]', '1 hour');
SELECT ordertimeout.begin_payment('named-then-unnamed', 'ntu-bank', method => 'bank_transfer');
SELECT ordertimeout.fail_payment('named-then-unnamed', 'ntu-bank');
SELECT ordertimeout.begin_payment('named-then-unnamed', 'ntu-2');
SELECT results_eq(
    $$SELECT payment_id, method FROM ordertimeout.order_payments('named-then-unnamed')$$,
    $$VALUES ('ntu-bank', 'bank_transfer'), ('ntu-2', 'bank_transfer')$$,
    'an unnamed attempt takes the order''s method at that moment');
SELECT is((SELECT gateway_expire_at - started_at FROM ordertimeout.orders JOIN ordertimeout.payments USING (order_id)
            WHERE payment_id = 'ntu-2'), interval '3 days', 'and that method''s window');

-- Money confirmed without a begin reads as the order's method until a
-- begin with another method records it: its conflict's policy stays.
SELECT ordertimeout.put_payment_method('card', interval '15 minutes', true, 'manual');
SELECT ordertimeout.create_order('mismatch', '[{"sku":"A","qty":1}]', '1 hour', '{"amount": 10, "currency": "EUR"}');
SELECT ordertimeout.begin_payment('mismatch', 'mm-card', method => 'card');
SELECT ordertimeout.confirm_payment('mismatch', 'mm-other', 9, 'EUR');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE payment_id = 'mm-other'), 'manual',
    'a mismatch confirmed without a begin: the order''s method''s policy');
SELECT ordertimeout.fail_payment('mismatch', 'mm-card');
SELECT ordertimeout.begin_payment('mismatch', 'mm-bank', method => 'bank_transfer');
SELECT is((SELECT late_payment FROM ordertimeout.open_conflicts() WHERE payment_id = 'mm-other'), 'manual',
    'a later attempt with another method leaves its conflict''s policy as it was');
SELECT is((SELECT method FROM ordertimeout.order_payments('mismatch') WHERE payment_id = 'mm-other'), 'card',
    'the order''s method then is recorded on it');

-- A method an attempt was started with is a known one.
SELECT throws_ok($$UPDATE ordertimeout.payments SET method = 'cheque' WHERE payment_id = 'bo-2'$$, '23503', NULL,
    'payments.method is a known payment method (payments_method_known)');

SELECT * FROM finish();
ROLLBACK;
