-- Removes what 000011 added: purge_orders and its indexes.

DROP FUNCTION ordertimeout.purge_orders(interval, integer, interval);
DROP FUNCTION ordertimeout._check_retention(text, interval, text);
DROP INDEX ordertimeout.orders_paid_at;
DROP INDEX ordertimeout.orders_closed_at;
