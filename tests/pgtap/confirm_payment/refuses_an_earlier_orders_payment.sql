-- confirm_payment with the gateway's paid_at refuses a payment it has not
-- seen for the order that was taken before the order could have had it
-- (OT178, nothing written): more than 5 minutes before the order was created,
-- or before an earlier order under its id was purged (plus 5 minutes), when
-- the order was given the id soon after (purged_orders). That is an earlier
-- order's money whose callback never came. A payment begun for the order is
-- the order's whatever paid_at says; paid_at must be a finite time from 2000
-- on (OT179); without it, nothing changes.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(12);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('e1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT created_at AS created FROM ordertimeout.orders WHERE order_id = 'e1' \gset
SELECT test.snapshot() AS before \gset

SELECT throws_like(format($$SELECT ordertimeout.confirm_payment('e1', 'old-pay', 10, 'EUR', %L::timestamptz - interval '6 minutes')$$, :'created'),
    'payment_id "old-pay" was taken at %, before order "e1" was created at %: a payment of an earlier order under this id, not confirmed (a person checks it at the gateway)',
    'taken 6 minutes before the order was created: refused');
SELECT throws_ok(format($$SELECT ordertimeout.confirm_payment('e1', 'old-pay', 10, 'EUR', %L::timestamptz - interval '6 minutes')$$, :'created'),
    'OT178', NULL, 'with OT178');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('e1', 'p', 10, 'EUR', 'infinity')$$, 'OT179', NULL, 'paid_at infinity: OT179');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('e1', 'p', 10, 'EUR', '1970-01-01 00:00:00+00')$$, 'OT179', NULL,
    'paid_at 1970 (a zero time): OT179');

-- A payment begun for the order: its own, whatever paid_at says.
SELECT ordertimeout.begin_payment('e1', 'begun');
SELECT is(ordertimeout.confirm_payment('e1', 'begun', 10, 'EUR', :'created'::timestamptz - interval '1 hour'), 'paid',
    'a begun payment pays whatever its paid_at');

-- An order given the id of one purged just before.
SELECT ordertimeout.create_order('e2', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.cancel_order('e2');
SELECT ordertimeout.close_cancelled('0');
SELECT is(ordertimeout.purge_orders('0', 10), 1, 'the first e2 purged');
SELECT purged_at AS purged FROM ordertimeout.purged_orders WHERE order_id = 'e2' \gset
SELECT ordertimeout.create_order('e2', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT throws_like(format($$SELECT ordertimeout.confirm_payment('e2', 'first-buyer', 10, 'EUR', %L::timestamptz + interval '4 minutes')$$, :'purged'),
    'payment_id "first-buyer" was taken at %, before an earlier order "e2" was purged at % and the id given to this one (created at %): a payment of the purged order, not confirmed (a person checks it at the gateway)',
    'taken before the purge (5 minutes allowed): refused, the purge named');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'e2'), 'PENDING', 'the new e2 is not paid');
SELECT is(ordertimeout.confirm_payment('e2', 'new-buyer', 10, 'EUR', :'purged'::timestamptz + interval '6 minutes'), 'paid',
    'taken more than 5 minutes after the purge: the new order''s');

-- Without paid_at, as before.
SELECT ordertimeout.create_order('e3', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT is(ordertimeout.confirm_payment('e3', 'no-time', 10, 'EUR'), 'paid', 'no paid_at: taken at its word');
SELECT is(ordertimeout.confirm_payment('e3', 'no-time', 10, 'EUR', :'created'::timestamptz - interval '1 hour'), 'paid',
    'a repeat of a payment confirmed here: the same answer, paid_at or not');

SELECT * FROM finish();
ROLLBACK;
