DROP TABLE ordertimeout.purged_orders;
