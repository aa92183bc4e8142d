-- Removes what 000011 added: the pg_cron sweeper, purge_orders and its
-- indexes. A pg_cron job that calls run_sweeper fails until it is
-- unscheduled: SELECT cron.unschedule('ordertimeout-sweep').

DROP PROCEDURE ordertimeout.run_sweeper(integer, interval, interval);
DROP FUNCTION ordertimeout.purge_orders(interval, integer, interval);
DROP FUNCTION ordertimeout._check_retention(text, interval, text);
DROP INDEX ordertimeout.orders_paid_at;
DROP INDEX ordertimeout.orders_closed_at;
