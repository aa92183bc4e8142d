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
