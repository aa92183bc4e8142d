-- Triggers: after the functions they call (plpgsql/), before the grants.

-- What purged paid orders bought (plpgsql/release.sql, _count_purged_sales).
CREATE TRIGGER order_items_count_purged_sales
    AFTER DELETE ON ordertimeout.order_items
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ordertimeout._count_purged_sales();
