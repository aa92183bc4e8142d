-- Back to the table constraints of migration 000019; the views that read the
-- tables are dropped and created again around the type change, as on the way up.

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

ALTER TABLE ordertimeout.orders
    ALTER COLUMN status TYPE text,
    ALTER COLUMN cancel_cause TYPE text,
    ALTER COLUMN precheck TYPE text,
    ALTER COLUMN amount TYPE numeric,
    ALTER COLUMN currency TYPE text,
    ADD CONSTRAINT orders_status_known
        CHECK (status IN ('PENDING', 'PAYING', 'PAID', 'CANCELLED', 'CLOSED', 'REFUNDED')),
    ADD CONSTRAINT orders_cancel_cause_known
        CHECK (cancel_cause IN ('timeout', 'sweep', 'requested', 'admin')),
    ADD CONSTRAINT orders_precheck_known CHECK (precheck IN ('attempted', 'always', 'never')),
    ADD CONSTRAINT orders_amount_finite CHECK (amount >= 0 AND amount < 1000000000000000),
    ADD CONSTRAINT orders_currency_iso CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE ordertimeout.payments
    ALTER COLUMN status TYPE text,
    ALTER COLUMN amount TYPE numeric,
    ALTER COLUMN currency TYPE text,
    ADD CONSTRAINT payments_status_known
        CHECK (status IN ('started', 'confirmed', 'failed', 'late', 'refunded')),
    ADD CONSTRAINT payments_amount_finite CHECK (amount >= 0 AND amount < 1000000000000000),
    ADD CONSTRAINT payments_currency_iso CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE ordertimeout.events
    ALTER COLUMN cause TYPE text,
    ADD CONSTRAINT events_cause_known
        CHECK (cause IN ('timeout', 'sweep', 'requested', 'payment', 'gateway', 'conflict', 'admin', 'reconcile'));
ALTER TABLE ordertimeout.stock
    ALTER COLUMN available TYPE bigint,
    ALTER COLUMN reserved TYPE bigint,
    ALTER COLUMN sold TYPE bigint,
    ADD CONSTRAINT stock_available_not_negative CHECK (available >= 0),
    ADD CONSTRAINT stock_reserved_not_negative CHECK (reserved >= 0),
    ADD CONSTRAINT stock_sold_not_negative CHECK (sold >= 0);

DROP DOMAIN ordertimeout.order_status, ordertimeout.cancel_cause, ordertimeout.precheck_policy,
    ordertimeout.money_amount, ordertimeout.currency_code, ordertimeout.payment_status,
    ordertimeout.event_cause, ordertimeout.stock_units;

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
