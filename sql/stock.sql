-- Stock per SKU. available + reserved + sold only changes through put_stock.

CREATE TABLE ordertimeout.stock (
    sku       text   NOT NULL,
    available ordertimeout.stock_units NOT NULL DEFAULT 0,
    reserved  ordertimeout.stock_units NOT NULL DEFAULT 0,
    sold      ordertimeout.stock_units NOT NULL DEFAULT 0,
    CONSTRAINT stock_pkey PRIMARY KEY (sku),
    CONSTRAINT stock_sku_length CHECK (char_length(sku) BETWEEN 1 AND 64)
) WITH (fillfactor = 50);

COMMENT ON TABLE ordertimeout.stock IS 'units per SKU: available to order, reserved by live orders, sold to paid orders';

-- What purged orders bought: purge_orders deletes PAID and REFUNDED orders
-- with their items, while stock.sold keeps counting their units. Adding them
-- up here per SKU keeps "sold = what the paid orders bought" checkable after
-- a purge (the invariant checks, sidecar/invariant). Written only by the
-- trigger on order_items' deletes (sql/triggers.sql), never on the order
-- path. No foreign key to stock: it would lock stock, which every order
-- writes, while migration 000031 fills the table.
CREATE TABLE ordertimeout.purged_sales (
    sku text   NOT NULL,
    qty bigint NOT NULL,
    CONSTRAINT purged_sales_pkey PRIMARY KEY (sku),
    CONSTRAINT purged_sales_qty_positive CHECK (qty > 0)
);

COMMENT ON TABLE ordertimeout.purged_sales IS 'units per SKU that purged PAID and REFUNDED orders bought: stock.sold still counts them, no order row does';
