-- Domains for the single-column rules of the tables every order writes.
--
-- A table's CHECK constraints are read back from the catalog, planned and
-- compiled again by every statement that writes a row of it (PostgreSQL 15,
-- ExecRelCheck per statement): on the order path that was about a third of
-- the backend's instructions (callgrind, create + begin + confirm). A
-- domain's constraints are read and planned once per session (the type
-- cache), and are checked only for the columns a statement assigns. The
-- rules are the same as the table constraints they replace, and like them
-- are declarative: changing one is ALTER DOMAIN, which checks every stored
-- value. Rules over several columns stay table constraints.

CREATE DOMAIN ordertimeout.order_status AS text
    CONSTRAINT order_status_known
        CHECK (VALUE IN ('PENDING', 'PAYING', 'PAID', 'CANCELLED', 'CLOSED', 'REFUNDED'));

CREATE DOMAIN ordertimeout.cancel_cause AS text
    CONSTRAINT cancel_cause_known CHECK (VALUE IN ('timeout', 'sweep', 'requested', 'admin'));

CREATE DOMAIN ordertimeout.precheck_policy AS text
    CONSTRAINT precheck_policy_known CHECK (VALUE IN ('attempted', 'always', 'never'));

-- NaN sorts above every number and 'NaN' >= 0 is true: the upper bound is
-- what keeps NaN and the infinities out.
CREATE DOMAIN ordertimeout.money_amount AS numeric
    CONSTRAINT money_amount_finite CHECK (VALUE >= 0 AND VALUE < 1000000000000000);

CREATE DOMAIN ordertimeout.currency_code AS text
    CONSTRAINT currency_code_iso CHECK (VALUE ~ '^[A-Z]{3}$');

CREATE DOMAIN ordertimeout.payment_status AS text
    CONSTRAINT payment_status_known CHECK (VALUE IN ('started', 'confirmed', 'failed', 'late', 'refunded'));

CREATE DOMAIN ordertimeout.event_cause AS text
    CONSTRAINT event_cause_known
        CHECK (VALUE IN ('timeout', 'sweep', 'requested', 'payment', 'gateway', 'conflict', 'admin', 'reconcile'));

CREATE DOMAIN ordertimeout.stock_units AS bigint
    CONSTRAINT stock_units_not_negative CHECK (VALUE >= 0);

COMMENT ON DOMAIN ordertimeout.order_status IS 'orders.status: the state machine''s states';
COMMENT ON DOMAIN ordertimeout.cancel_cause IS 'orders.cancel_cause: why an order was cancelled';
COMMENT ON DOMAIN ordertimeout.precheck_policy IS 'orders.precheck: when the gateway is asked before a timeout cancel';
COMMENT ON DOMAIN ordertimeout.money_amount IS 'orders.amount, payments.amount: a finite amount from 0 to below 10^15';
COMMENT ON DOMAIN ordertimeout.currency_code IS 'orders.currency, payments.currency: three upper-case letters (ISO 4217)';
COMMENT ON DOMAIN ordertimeout.payment_status IS 'payments.status';
COMMENT ON DOMAIN ordertimeout.event_cause IS 'events.cause: what made a transition';
COMMENT ON DOMAIN ordertimeout.stock_units IS 'stock.available, reserved, sold: never negative';
