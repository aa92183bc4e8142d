DROP TABLE ordertimeout.purged_payments;
ALTER TABLE ordertimeout.conflicts DROP CONSTRAINT conflicts_one_per_refund;
