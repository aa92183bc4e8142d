ALTER TABLE ordertimeout.sweep_state SET UNLOGGED;
COMMENT ON TABLE ordertimeout.sweep_state IS
    'when the sleeping sweepers wake up on their own (written by plan_sleep, read by create_order); unlogged: empty after a crash until the next plan_sleep';
