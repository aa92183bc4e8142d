ALTER TABLE ordertimeout.sweep_state SET LOGGED;
COMMENT ON TABLE ordertimeout.sweep_state IS
    'when the sleeping sweepers wake up on their own (written by plan_sleep, read by create_order)';
