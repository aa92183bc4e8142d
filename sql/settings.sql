-- Settings: one row, changed with ordertimeout.configure().

CREATE TABLE ordertimeout.settings (
    singleton       boolean     NOT NULL DEFAULT true,
    default_timeout interval    NOT NULL DEFAULT interval '30 minutes',
    grace           interval    NOT NULL DEFAULT interval '60 seconds',
    paying_window   interval    NOT NULL DEFAULT interval '15 minutes',
    precheck        text        NOT NULL DEFAULT 'attempted',
    late_payment    text        NOT NULL DEFAULT 'reinstate',
    webhooks        boolean     NOT NULL DEFAULT false,
    remind_before   interval,
    paused          boolean     NOT NULL DEFAULT false,
    paused_at       timestamptz,
    paused_by       text,
    resumed_at      timestamptz,
    CONSTRAINT settings_single_row PRIMARY KEY (singleton),
    CONSTRAINT settings_singleton_is_true CHECK (singleton),
    CONSTRAINT settings_default_timeout_in_range
        CHECK (default_timeout > interval '0' AND default_timeout <= interval '30 days'),
    CONSTRAINT settings_grace_in_range
        CHECK (grace >= interval '0' AND grace <= interval '1 day'),
    CONSTRAINT settings_paying_window_in_range
        CHECK (paying_window > interval '0' AND paying_window <= interval '30 days'),
    CONSTRAINT settings_precheck_known
        CHECK (precheck IN ('attempted', 'always', 'never')),
    CONSTRAINT settings_late_payment_known
        CHECK (late_payment IN ('reinstate', 'refund', 'manual')),
    CONSTRAINT settings_remind_before_positive
        CHECK (remind_before IS NULL OR remind_before > interval '0'),
    CONSTRAINT settings_paused_has_paused_at CHECK (NOT paused OR paused_at IS NOT NULL),
    -- Days, hours, minutes and seconds only: no month part (a month has no
    -- fixed length) and no negative part (a day is a calendar day, 23 or 25
    -- hours across a daylight-saving change); configure() refuses both too.
    CONSTRAINT settings_default_timeout_plain_duration
        CHECK (date_trunc('month', default_timeout) = interval '0' AND date_trunc('day', default_timeout) >= interval '0'
              AND default_timeout - date_trunc('day', default_timeout) >= interval '0'),
    CONSTRAINT settings_grace_plain_duration
        CHECK (date_trunc('month', grace) = interval '0' AND date_trunc('day', grace) >= interval '0'
              AND grace - date_trunc('day', grace) >= interval '0'),
    CONSTRAINT settings_paying_window_plain_duration
        CHECK (date_trunc('month', paying_window) = interval '0' AND date_trunc('day', paying_window) >= interval '0'
              AND paying_window - date_trunc('day', paying_window) >= interval '0'),
    CONSTRAINT settings_remind_before_plain_duration
        CHECK (date_trunc('month', remind_before) = interval '0' AND date_trunc('day', remind_before) >= interval '0'
              AND remind_before - date_trunc('day', remind_before) >= interval '0')
);

COMMENT ON TABLE ordertimeout.settings IS 'the one row of settings; change it with ordertimeout.configure()';
COMMENT ON COLUMN ordertimeout.settings.grace IS 'cancel_at = expire_at + grace: lets in-flight payment callbacks land first';
COMMENT ON COLUMN ordertimeout.settings.precheck IS
    'which orders are checked with the payment gateway before a timeout cancels them: attempted (a payment was started), always, never';
COMMENT ON COLUMN ordertimeout.settings.late_payment IS 'how the sidecar resolves a payment confirmed after the cancel';
COMMENT ON COLUMN ordertimeout.settings.paused IS
    'while true nothing is cancelled by a timeout: sweep_due claims nothing, cancel_checked refuses (OT137), gateway closes wait; payments and conflicts go on';
COMMENT ON COLUMN ordertimeout.settings.paused_at IS 'when the last pause began (kept after the resume: cancels due during it say they waited)';
COMMENT ON COLUMN ordertimeout.settings.resumed_at IS 'when the last pause ended';

INSERT INTO ordertimeout.settings DEFAULT VALUES;

-- Sweep state: one row. wake_at is the moment the sleeping sweepers will wake
-- up on their own; an order whose deadline comes sooner sends a wake-up.
-- UNLOGGED: wake_at is a hint, written by plan_next_sweep after every sweep, and a
-- transaction that writes only unlogged tables commits without waiting for a
-- WAL flush (one fsync less per sweep). After a crash the table is empty:
-- _wake_if_sooner then wakes the sweepers on every new order until the next
-- plan_next_sweep writes the row again.
CREATE UNLOGGED TABLE ordertimeout.sweep_state (
    singleton boolean     NOT NULL DEFAULT true,
    wake_at   timestamptz NOT NULL DEFAULT '-infinity',
    CONSTRAINT sweep_state_single_row PRIMARY KEY (singleton),
    CONSTRAINT sweep_state_singleton_is_true CHECK (singleton)
) WITH (fillfactor = 50);

INSERT INTO ordertimeout.sweep_state DEFAULT VALUES;

COMMENT ON TABLE ordertimeout.sweep_state IS
    'when the sleeping sweepers wake up on their own (written by plan_sleep, read by create_order); unlogged: empty after a crash until the next plan_sleep';

-- Scan state: one row. scanned_at is when a sweep last looked at every due
-- timer row and overdue PENDING order, rather than at those due in the last
-- 2 seconds only, and backlog whether the last sweep that wrote it came back
-- full (ordertimeout._scan_from says why and when). A table of its own: a
-- sweep writes it (SKIP LOCKED) and holds it to its commit, and plan_next_sweep,
-- which writes sweep_state, must never wait for a sweep. UNLOGGED, a hint:
-- after a crash it is empty, and sweeps look at every due row until one
-- writes it again.
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

-- Rescue state: one row. sweep_due looks for gateway-check jobs that River
-- lost (discarded, cancelled, deleted) at most once per 10 seconds; the
-- session that takes this row (SKIP LOCKED) does it, the others go on.
CREATE TABLE ordertimeout.rescue_state (
    singleton  boolean     NOT NULL DEFAULT true,
    rescued_at timestamptz NOT NULL DEFAULT '-infinity',
    CONSTRAINT rescue_state_single_row PRIMARY KEY (singleton),
    CONSTRAINT rescue_state_singleton_is_true CHECK (singleton)
);

COMMENT ON TABLE ordertimeout.rescue_state IS
    'when sweep_due last looked for orders whose gateway-check job River lost';

INSERT INTO ordertimeout.rescue_state DEFAULT VALUES;
