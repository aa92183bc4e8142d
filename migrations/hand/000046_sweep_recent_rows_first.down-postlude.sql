-- The table only the functions of 000046 read and write.
DROP TABLE ordertimeout.scan_state;
