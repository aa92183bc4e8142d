-- The table the purge's counting writes (sql/stock.sql), readable by the
-- administrator like every table (sql/grants.sql).
CREATE TABLE ordertimeout.purged_sales (
    sku text   NOT NULL,
    qty bigint NOT NULL,
    CONSTRAINT purged_sales_pkey PRIMARY KEY (sku),
    CONSTRAINT purged_sales_qty_positive CHECK (qty > 0)
);

COMMENT ON TABLE ordertimeout.purged_sales IS 'units per SKU that purged PAID and REFUNDED orders bought: stock.sold still counts them, no order row does';

GRANT SELECT ON ordertimeout.purged_sales TO ordertimeout_admin;

-- The trigger function, here rather than generated below because the
-- trigger needs it first (plpgsql/release.sql has the same text).
CREATE FUNCTION ordertimeout._count_purged_sales()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO ordertimeout.purged_sales AS ps (sku, qty)
    SELECT g.sku, sum(g.qty)
    FROM gone AS g
    JOIN ordertimeout.orders AS o ON o.order_id = g.order_id
    WHERE o.status IN ('PAID', 'REFUNDED')
    GROUP BY g.sku
    ORDER BY g.sku
    ON CONFLICT ON CONSTRAINT purged_sales_pkey DO UPDATE
    SET qty = ps.qty + excluded.qty;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION ordertimeout._count_purged_sales() FROM PUBLIC;

-- The trigger (sql/triggers.sql). CREATE TRIGGER locks order_items in SHARE
-- ROW EXCLUSIVE mode until this migration commits: it waits for every
-- transaction that has inserted or deleted items (a purge of the version
-- before, which counts nothing, among them) to end, and holds off new ones
-- (create_order, purges) until the commit, for the time the fill below
-- takes (one read of the paid orders' items). So the fill sees every purge
-- that deleted items before, and the trigger counts every delete after,
-- whatever version of purge_orders runs it.
CREATE TRIGGER order_items_count_purged_sales
    AFTER DELETE ON ordertimeout.order_items
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ordertimeout._count_purged_sales();

-- What was purged before: sold minus what the PAID and REFUNDED orders left
-- bought. That is exactly what purged orders bought unless sold was already
-- wrong, which the checks could not tell apart once a paid order had been
-- purged; a SKU with less sold than its paid orders bought gets no row and
-- stays a violation.
INSERT INTO ordertimeout.purged_sales (sku, qty)
SELECT s.sku, s.sold - coalesce(t.qty, 0)
FROM ordertimeout.stock AS s
LEFT JOIN (SELECT i.sku, sum(i.qty) AS qty
             FROM ordertimeout.order_items AS i
             JOIN ordertimeout.orders AS o ON o.order_id = i.order_id
            WHERE o.status IN ('PAID', 'REFUNDED')
            GROUP BY i.sku) AS t ON t.sku = s.sku
WHERE s.sold > coalesce(t.qty, 0);
