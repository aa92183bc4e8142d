-- Retention: the indexes purge_orders walks, oldest first. Finished orders
-- only; the live indexes (orders.sql) never see them.
--
-- Migration 000011 creates them with IF NOT EXISTS: on a large orders table,
-- build them first with CREATE INDEX CONCURRENTLY (same name, same
-- definition) so that the migration does not block writes while it builds.

CREATE INDEX orders_closed_at
    ON ordertimeout.orders (closed_at)
    WHERE status = 'CLOSED';

CREATE INDEX orders_paid_at
    ON ordertimeout.orders (paid_at)
    WHERE status IN ('PAID', 'REFUNDED');
