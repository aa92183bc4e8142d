DROP TRIGGER order_items_count_purged_sales ON ordertimeout.order_items;
DROP FUNCTION ordertimeout._count_purged_sales();
DROP TABLE ordertimeout.purged_sales;
