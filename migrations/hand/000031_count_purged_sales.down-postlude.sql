DROP TABLE ordertimeout.purged_sales;
