-- next_due returns when the earliest timer row comes due, NULL when there is
-- none; payment checks and other jobs do not count.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

SELECT is(ordertimeout.next_due(), NULL, 'no timer: NULL');

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('later', '[{"sku": "A", "qty": 1}]', interval '20 minutes');
SELECT ordertimeout.create_order('sooner', '[{"sku": "A", "qty": 1}]', interval '10 minutes');
SELECT is(ordertimeout.next_due(), (SELECT cancel_at FROM ordertimeout.orders WHERE order_id = 'sooner'),
    'the cancel_at of the order due first');

SELECT ordertimeout.begin_payment('sooner', 'p1', interval '1 minute');
SELECT is(ordertimeout.next_due(), (SELECT cancel_at FROM ordertimeout.orders WHERE order_id = 'later'),
    'a payment check is no timer: the next timer is the later order''s');

SELECT * FROM finish();
ROLLBACK;
