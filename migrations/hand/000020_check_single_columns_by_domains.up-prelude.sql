-- The views that read the tables below, directly or through other views,
-- with their options, owners, comments and grants (column ones included):
-- ALTER COLUMN TYPE refuses to change a column a view uses. A materialized
-- view or a function body that reads them makes the migration refuse before
-- it starts (migrations.Preflight).
CREATE TEMP TABLE migration_000020_views AS
WITH RECURSIVE dependent (oid, depth) AS (
    SELECT r.ev_class, 1
    FROM pg_depend AS d
    JOIN pg_rewrite AS r ON r.oid = d.objid
    WHERE d.classid = 'pg_rewrite'::regclass
      AND d.refclassid = 'pg_class'::regclass
      AND d.refobjid IN ('ordertimeout.orders'::regclass, 'ordertimeout.payments'::regclass,
                         'ordertimeout.events'::regclass, 'ordertimeout.stock'::regclass)
      AND r.ev_class <> d.refobjid
    UNION
    SELECT r.ev_class, dep.depth + 1
    FROM dependent AS dep
    JOIN pg_depend AS d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = dep.oid
    JOIN pg_rewrite AS r ON r.oid = d.objid AND d.classid = 'pg_rewrite'::regclass
    WHERE r.ev_class <> dep.oid
)
SELECT c.oid, max(dep.depth) AS depth, c.oid::regclass::text AS name, pg_get_viewdef(c.oid) AS definition,
       c.reloptions, c.relowner::regrole::text AS owner, c.relacl,
       obj_description(c.oid, 'pg_class') AS comment,
       (SELECT jsonb_object_agg(a.attname, col_description(c.oid, a.attnum))
          FROM pg_attribute AS a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND col_description(c.oid, a.attnum) IS NOT NULL) AS column_comments,
       (SELECT jsonb_object_agg(a.attname, a.attacl::text[])
          FROM pg_attribute AS a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND a.attacl IS NOT NULL) AS column_acls
FROM dependent AS dep
JOIN pg_class AS c ON c.oid = dep.oid
WHERE c.relkind = 'v'
GROUP BY c.oid;
DO $views$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT * FROM migration_000020_views ORDER BY depth DESC, oid DESC LOOP
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
    k text;
BEGIN
    FOR v IN SELECT * FROM migration_000020_views ORDER BY depth, oid LOOP
        EXECUTE format('CREATE VIEW %s%s AS %s', v.name,
                       CASE WHEN v.reloptions IS NULL THEN ''
                            ELSE format(' WITH (%s)', array_to_string(v.reloptions, ', ')) END,
                       v.definition);
        EXECUTE format('ALTER VIEW %s OWNER TO %s', v.name, v.owner);
        IF v.comment IS NOT NULL THEN
            EXECUTE format('COMMENT ON VIEW %s IS %L', v.name, v.comment);
        END IF;
        FOR k IN SELECT jsonb_object_keys(coalesce(v.column_comments, '{}')) LOOP
            EXECUTE format('COMMENT ON COLUMN %s.%I IS %L', v.name, k, v.column_comments ->> k);
        END LOOP;
        -- The grants (the owner's own are the owner's defaults); made by
        -- the migrating role, so recorded with the owner as grantor.
        FOR g IN SELECT a.privilege_type, a.grantee, a.is_grantable, NULL::text AS col
                   FROM aclexplode(v.relacl) AS a
                  WHERE a.grantee <> a.grantor
                 UNION ALL
                 SELECT a.privilege_type, a.grantee, a.is_grantable, c.key
                   FROM jsonb_each(coalesce(v.column_acls, '{}')) AS c,
                        aclexplode(ARRAY(SELECT jsonb_array_elements_text(c.value))::aclitem[]) AS a
                  WHERE a.grantee <> a.grantor LOOP
            EXECUTE format('GRANT %s%s ON %s TO %s%s', g.privilege_type,
                           CASE WHEN g.col IS NULL THEN '' ELSE format(' (%I)', g.col) END, v.name,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END LOOP;
END
$views$;
DROP TABLE migration_000020_views;

-- ALTER COLUMN TYPE drops the statistics of the columns it changes.
ANALYZE ordertimeout.orders (status, cancel_cause, precheck, amount, currency),
    ordertimeout.payments (status, amount, currency), ordertimeout.events (cause),
    ordertimeout.stock (available, reserved, sold);
