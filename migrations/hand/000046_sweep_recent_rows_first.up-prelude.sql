-- When a sweep last looked at every due timer row, for _scan_from
-- (sql/settings.sql): a table of its own, so that plan_sleep, which writes
-- sweep_state, never waits for a sweep that holds this row to its commit.
CREATE UNLOGGED TABLE ordertimeout.scan_state (
    singleton  boolean     NOT NULL DEFAULT true,
    scanned_at timestamptz,
    backlog    boolean     NOT NULL DEFAULT false,
    CONSTRAINT scan_state_single_row PRIMARY KEY (singleton),
    CONSTRAINT scan_state_singleton_is_true CHECK (singleton)
) WITH (fillfactor = 50);

INSERT INTO ordertimeout.scan_state DEFAULT VALUES;

COMMENT ON TABLE ordertimeout.scan_state IS
    'when a sweep last looked at every due row rather than the last 2 seconds only (scanned_at), and whether it came back full (backlog); written by sweep_due, unlogged: empty after a crash until a sweep writes it';

-- Readable by the administrator like every table (sql/grants.sql).
GRANT SELECT ON ordertimeout.scan_state TO ordertimeout_admin;
