-- A PAID order with another attempt still open is kept until that attempt's
-- window has passed: gateway_expire_at plus the grace given at its
-- begin_payment (which cancel_at is never before), not plus a grace lowered
-- since. A review purged such an order a minute inside its window after
-- configure(grace => '0'), and the open attempt's money found no order.
-- Time passing is made by moving the order's moments back.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('pg1', '[{"sku":"A","qty":1}]', interval '1 minute');
SELECT ordertimeout.begin_payment('pg1', 'pg1-a', interval '3 minutes');   -- its window: +3 min, +1 min of grace
SELECT ordertimeout.begin_payment('pg1', 'pg1-b', interval '1 minute');
SELECT ordertimeout.confirm_payment('pg1', 'pg1-b');
SELECT ordertimeout.configure(grace => interval '0');
CREATE FUNCTION pg_temp.age_by(d interval) RETURNS void LANGUAGE sql AS $$
    UPDATE ordertimeout.orders
       SET created_at = created_at - d, expire_at = expire_at - d, cancel_at = cancel_at - d,
           gateway_expire_at = gateway_expire_at - d, paid_at = paid_at - d
     WHERE order_id = 'pg1' $$;

SELECT pg_temp.age_by(interval '3 minutes 30 seconds');   -- the gateway's expiry 30 s ago, the window's end in 30 s
SELECT is(ordertimeout.purge_orders('100 years', 10, paid_older_than => '0'), 0,
    'inside the window given at begin_payment: kept, whatever the grace now');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'pg1'), 'PAID', 'the order is there for pg1-a''s money');

SELECT pg_temp.age_by(interval '1 minute');               -- the window ended 30 s ago
SELECT is(ordertimeout.purge_orders('100 years', 10, paid_older_than => '0'), 1, 'once it has passed: purged');

SELECT * FROM finish();
ROLLBACK;
