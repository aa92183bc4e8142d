-- When a sweep last looked at every due timer row, for _scan_from
-- (sql/settings.sql). Both columns are added without rewriting the table (a
-- NULL and a constant default); the ALTER holds sweep_state, which every
-- create_order reads, for that moment only.
ALTER TABLE ordertimeout.sweep_state
    ADD COLUMN scanned_at timestamptz,
    ADD COLUMN backlog boolean NOT NULL DEFAULT false;

COMMENT ON TABLE ordertimeout.sweep_state IS
    'when the sleeping sweepers wake up on their own (written by plan_sleep, read by create_order), and when a sweep last looked at every due row (scanned_at; backlog: it came back full); unlogged: empty after a crash until the next plan_sleep';
