-- The views that read the tables below, with their comments and grants: ALTER
-- COLUMN TYPE refuses to change a column a view uses.
CREATE TEMP TABLE migration_000020_views AS
SELECT c.oid, c.oid::regclass::text AS name, pg_get_viewdef(c.oid) AS definition,
       obj_description(c.oid, 'pg_class') AS comment, c.relacl
FROM pg_class AS c
WHERE c.relkind = 'v'
  AND c.oid IN (SELECT r.ev_class
                  FROM pg_depend AS d
                  JOIN pg_rewrite AS r ON r.oid = d.objid
                 WHERE d.classid = 'pg_rewrite'::regclass
                   AND d.refobjid IN ('ordertimeout.orders'::regclass, 'ordertimeout.payments'::regclass,
                                      'ordertimeout.events'::regclass, 'ordertimeout.stock'::regclass));
DO $views$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT * FROM migration_000020_views ORDER BY oid DESC LOOP
        EXECUTE format('DROP VIEW %s', v.name);
    END LOOP;
END
$views$;

-- The domains, first without their rules, so that the type change rewrites
-- nothing; each rule is then added to its domain, which checks the stored
-- values once.
CREATE DOMAIN ordertimeout.order_status AS text;
CREATE DOMAIN ordertimeout.cancel_cause AS text;
CREATE DOMAIN ordertimeout.precheck_policy AS text;
CREATE DOMAIN ordertimeout.money_amount AS numeric;
CREATE DOMAIN ordertimeout.currency_code AS text;
CREATE DOMAIN ordertimeout.payment_status AS text;
CREATE DOMAIN ordertimeout.event_cause AS text;
CREATE DOMAIN ordertimeout.stock_units AS bigint;

ALTER TABLE ordertimeout.orders
    DROP CONSTRAINT orders_status_known,
    DROP CONSTRAINT orders_cancel_cause_known,
    DROP CONSTRAINT orders_precheck_known,
    DROP CONSTRAINT orders_amount_finite,
    DROP CONSTRAINT orders_currency_iso,
    ALTER COLUMN status TYPE ordertimeout.order_status,
    ALTER COLUMN cancel_cause TYPE ordertimeout.cancel_cause,
    ALTER COLUMN precheck TYPE ordertimeout.precheck_policy,
    ALTER COLUMN amount TYPE ordertimeout.money_amount,
    ALTER COLUMN currency TYPE ordertimeout.currency_code;
ALTER TABLE ordertimeout.payments
    DROP CONSTRAINT payments_status_known,
    DROP CONSTRAINT payments_amount_finite,
    DROP CONSTRAINT payments_currency_iso,
    ALTER COLUMN status TYPE ordertimeout.payment_status,
    ALTER COLUMN amount TYPE ordertimeout.money_amount,
    ALTER COLUMN currency TYPE ordertimeout.currency_code;
ALTER TABLE ordertimeout.events
    DROP CONSTRAINT events_cause_known,
    ALTER COLUMN cause TYPE ordertimeout.event_cause;
ALTER TABLE ordertimeout.stock
    DROP CONSTRAINT stock_available_not_negative,
    DROP CONSTRAINT stock_reserved_not_negative,
    DROP CONSTRAINT stock_sold_not_negative,
    ALTER COLUMN available TYPE ordertimeout.stock_units,
    ALTER COLUMN reserved TYPE ordertimeout.stock_units,
    ALTER COLUMN sold TYPE ordertimeout.stock_units;

ALTER DOMAIN ordertimeout.order_status ADD CONSTRAINT order_status_known
    CHECK (VALUE IN ('PENDING', 'PAYING', 'PAID', 'CANCELLED', 'CLOSED', 'REFUNDED'));
ALTER DOMAIN ordertimeout.cancel_cause ADD CONSTRAINT cancel_cause_known
    CHECK (VALUE IN ('timeout', 'sweep', 'requested', 'admin'));
ALTER DOMAIN ordertimeout.precheck_policy ADD CONSTRAINT precheck_policy_known
    CHECK (VALUE IN ('attempted', 'always', 'never'));
ALTER DOMAIN ordertimeout.money_amount ADD CONSTRAINT money_amount_finite
    CHECK (VALUE >= 0 AND VALUE < 1000000000000000);
ALTER DOMAIN ordertimeout.currency_code ADD CONSTRAINT currency_code_iso
    CHECK (VALUE ~ '^[A-Z]{3}$');
ALTER DOMAIN ordertimeout.payment_status ADD CONSTRAINT payment_status_known
    CHECK (VALUE IN ('started', 'confirmed', 'failed', 'late', 'refunded'));
ALTER DOMAIN ordertimeout.event_cause ADD CONSTRAINT event_cause_known
    CHECK (VALUE IN ('timeout', 'sweep', 'requested', 'payment', 'gateway', 'conflict', 'admin', 'reconcile'));
ALTER DOMAIN ordertimeout.stock_units ADD CONSTRAINT stock_units_not_negative
    CHECK (VALUE >= 0);

COMMENT ON DOMAIN ordertimeout.order_status IS 'orders.status: the state machine''s states';
COMMENT ON DOMAIN ordertimeout.cancel_cause IS 'orders.cancel_cause: why an order was cancelled';
COMMENT ON DOMAIN ordertimeout.precheck_policy IS 'orders.precheck: when the gateway is asked before a timeout cancel';
COMMENT ON DOMAIN ordertimeout.money_amount IS 'orders.amount, payments.amount: a finite amount from 0 to below 10^15';
COMMENT ON DOMAIN ordertimeout.currency_code IS 'orders.currency, payments.currency: three upper-case letters (ISO 4217)';
COMMENT ON DOMAIN ordertimeout.payment_status IS 'payments.status';
COMMENT ON DOMAIN ordertimeout.event_cause IS 'events.cause: what made a transition';
COMMENT ON DOMAIN ordertimeout.stock_units IS 'stock.available, reserved, sold: never negative';

-- The views again, as they were.
DO $views$
DECLARE
    v record;
    g record;
BEGIN
    FOR v IN SELECT * FROM migration_000020_views ORDER BY oid LOOP
        EXECUTE format('CREATE VIEW %s AS %s', v.name, v.definition);
        IF v.comment IS NOT NULL THEN
            EXECUTE format('COMMENT ON VIEW %s IS %L', v.name, v.comment);
        END IF;
        FOR g IN SELECT a.privilege_type, a.grantee, a.is_grantable
                   FROM aclexplode(v.relacl) AS a
                  WHERE a.grantee <> a.grantor LOOP
            EXECUTE format('GRANT %s ON %s TO %s%s', g.privilege_type, v.name,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(g.grantee::regrole::text) END,
                           CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END LOOP;
END
$views$;
DROP TABLE migration_000020_views;
