-- Back to the table constraints of migration 000019: the views that read the
-- tables are dropped and created again around the type change, as on the way
-- up.
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
