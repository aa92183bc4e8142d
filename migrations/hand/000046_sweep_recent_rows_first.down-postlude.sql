-- The columns only the functions of 000046 read.
ALTER TABLE ordertimeout.sweep_state
    DROP COLUMN scanned_at,
    DROP COLUMN backlog;

COMMENT ON TABLE ordertimeout.sweep_state IS
    'when the sleeping sweepers wake up on their own (written by plan_sleep, read by create_order); unlogged: empty after a crash until the next plan_sleep';
