-- The order lifecycle from psql. Run with -v order_id=SOMETHING.
\set ON_ERROR_STOP on

SELECT sku, available FROM ordertimeout.put_stock('SKU-EXAMPLE', 1000);

SELECT order_id, status, created, expire_at, cancel_at
FROM ordertimeout.create_order(
    order_id => :'order_id',
    items    => '[{"sku": "SKU-EXAMPLE", "qty": 2}]',
    timeout  => '15 minutes',
    options  => '{"amount": 19.90, "currency": "EUR"}');

SELECT status, paying_until FROM ordertimeout.begin_payment(:'order_id', :'order_id' || '-pay');
SELECT ordertimeout.confirm_payment(:'order_id', :'order_id' || '-pay', 19.90) AS outcome;

SELECT from_status, to_status, cause FROM ordertimeout.order_events(:'order_id');
