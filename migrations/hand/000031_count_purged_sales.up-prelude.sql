-- The table purge_orders now writes (sql/stock.sql), readable by the
-- administrator like every table (sql/grants.sql).
CREATE TABLE ordertimeout.purged_sales (
    sku text   NOT NULL,
    qty bigint NOT NULL,
    CONSTRAINT purged_sales_pkey PRIMARY KEY (sku),
    CONSTRAINT purged_sales_sku_in_stock FOREIGN KEY (sku) REFERENCES ordertimeout.stock (sku),
    CONSTRAINT purged_sales_qty_positive CHECK (qty > 0)
);

COMMENT ON TABLE ordertimeout.purged_sales IS 'units per SKU that purged PAID and REFUNDED orders bought: stock.sold still counts them, no order row does';

GRANT SELECT ON ordertimeout.purged_sales TO ordertimeout_admin;

-- What was purged before this migration: sold minus what the PAID and
-- REFUNDED orders left bought. That is exactly what purged orders bought
-- unless sold was already wrong, which the checks could not tell apart once
-- a paid order had been purged; a SKU with less sold than its paid orders
-- bought gets no row and stays a violation.
INSERT INTO ordertimeout.purged_sales (sku, qty)
SELECT s.sku, s.sold - coalesce(t.qty, 0)
FROM ordertimeout.stock AS s
LEFT JOIN (SELECT i.sku, sum(i.qty) AS qty
             FROM ordertimeout.order_items AS i
             JOIN ordertimeout.orders AS o ON o.order_id = i.order_id
            WHERE o.status IN ('PAID', 'REFUNDED')
            GROUP BY i.sku) AS t ON t.sku = s.sku
WHERE s.sold > coalesce(t.qty, 0);
