-- put_payment_method creates and changes payment methods, safe to repeat;
-- bad names (OT161), windows <= 0, over 30 days or with a month part (OT162)
-- and unknown policies (OT163) are refused and write nothing. The defaults:
-- card 15 min, qr 2 h, bank_transfer 3 days without a gateway close and
-- refunded when paid late.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

SELECT results_eq($$SELECT method, paying_window, gateway_close, late_payment FROM ordertimeout.payment_methods ORDER BY 1$$,
    $$VALUES ('bank_transfer', interval '3 days', false, 'refund'), ('card', interval '15 minutes', true, NULL),
             ('qr', interval '2 hours', true, NULL)$$, 'the default methods');
SELECT results_eq($$SELECT method, paying_window, gateway_close, late_payment
                      FROM ordertimeout.put_payment_method('wechat_qr', interval '2 hours')$$,
    $$VALUES ('wechat_qr', interval '2 hours', true, NULL::text)$$, 'a new method');
SELECT results_eq($$SELECT paying_window, late_payment
                      FROM ordertimeout.put_payment_method('wechat_qr', interval '30 minutes', true, 'manual')$$,
    $$VALUES (interval '30 minutes', 'manual')$$, 'changed');
SELECT is((SELECT count(*)::integer FROM ordertimeout.payment_methods WHERE method = 'wechat_qr'), 1, 'one row');

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.put_payment_method('WeChat', interval '1 hour')$$, 'OT161', NULL, 'upper case: OT161');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method(NULL, interval '1 hour')$$, 'OT100', NULL, 'NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method('m', interval '0')$$, 'OT162', NULL, 'window 0: OT162');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method('m', interval '31 days')$$, 'OT162', NULL, 'window 31 days: OT162');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method('m', interval '1 mon')$$, 'OT162', NULL, 'window 1 mon: OT162');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method('m', interval '1 hour', true, 'keep')$$, 'OT163', NULL,
    'unknown policy: OT163');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
