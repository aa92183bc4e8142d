-- Stock per SKU. available + reserved + sold only changes through put_stock.

CREATE TABLE ordertimeout.stock (
    sku       text   NOT NULL,
    available bigint NOT NULL DEFAULT 0,
    reserved  bigint NOT NULL DEFAULT 0,
    sold      bigint NOT NULL DEFAULT 0,
    CONSTRAINT stock_pkey PRIMARY KEY (sku),
    CONSTRAINT stock_sku_length CHECK (char_length(sku) BETWEEN 1 AND 64),
    CONSTRAINT stock_available_not_negative CHECK (available >= 0),
    CONSTRAINT stock_reserved_not_negative CHECK (reserved >= 0),
    CONSTRAINT stock_sold_not_negative CHECK (sold >= 0)
) WITH (fillfactor = 50);

COMMENT ON TABLE ordertimeout.stock IS 'units per SKU: available to order, reserved by live orders, sold to paid orders';
