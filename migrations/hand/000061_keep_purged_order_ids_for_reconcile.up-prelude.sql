-- The order ids purge_orders deleted lately (sql/payments.sql), readable by
-- the administrator like every table (sql/grants.sql). Purges before this
-- migration recorded none: an order given such an id before it is
-- reconciled as before.
CREATE TABLE ordertimeout.purged_orders (
    order_id  text        NOT NULL,
    purged_at timestamptz NOT NULL,
    CONSTRAINT purged_orders_pkey PRIMARY KEY (order_id)
);

CREATE INDEX purged_orders_purged_at ON ordertimeout.purged_orders (purged_at);

COMMENT ON TABLE ordertimeout.purged_orders IS
    'order ids purge_orders deleted lately, with the moment: a payment unknown here that the gateway took before it (5 minutes allowed) is not confirmed for a new order under that id';

GRANT SELECT ON ordertimeout.purged_orders TO ordertimeout_admin;
