-- Measurement only, never a migration: see ../create-price-list.sh.
ALTER TABLE ordertimeout.order_items DROP CONSTRAINT order_items_order_exists;
ALTER TABLE ordertimeout.orders DROP CONSTRAINT orders_payment_method_known;
