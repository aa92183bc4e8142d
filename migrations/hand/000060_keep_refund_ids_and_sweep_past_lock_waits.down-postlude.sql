DROP TABLE ordertimeout.purged_refunds;
