-- A refund gives back one payment (sql/payments.sql,
-- conflicts_one_per_refund). Conflicts that already share a refund_id are
-- named here, and the migration stops: at most one of their payments was
-- refunded by it, which a person checks at the gateway before the rows are
-- corrected by hand.
DO $check$
DECLARE
    v_bad text;
BEGIN
    SELECT string_agg(format('refund_id %s: conflicts %s', d.refund_id, d.ids), '; ')
    INTO v_bad
    FROM (SELECT c.refund_id, string_agg(c.conflict_id::text, ', ' ORDER BY c.conflict_id) AS ids
            FROM ordertimeout.conflicts AS c
           WHERE c.refund_id IS NOT NULL
           GROUP BY c.refund_id
          HAVING count(*) > 1) AS d;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'migration 000055: one refund is recorded for several conflicts (%): at most one of their payments was refunded by it; check them at the gateway, correct the rows, then migrate', v_bad
            USING ERRCODE = 'unique_violation';
    END IF;
END
$check$;

ALTER TABLE ordertimeout.conflicts
    ADD CONSTRAINT conflicts_one_per_refund UNIQUE (refund_id);

-- The payment ids of purged orders (sql/payments.sql), readable by the
-- administrator like every table (sql/grants.sql). Purges before this
-- migration kept none: their payments' callbacks are refused only while
-- their order id stays free (OT120).
CREATE TABLE ordertimeout.purged_payments (
    payment_id text        NOT NULL,
    order_id   text        NOT NULL,
    purged_at  timestamptz NOT NULL,
    CONSTRAINT purged_payments_pkey PRIMARY KEY (payment_id)
);

COMMENT ON TABLE ordertimeout.purged_payments IS
    'payment ids of orders that purge_orders deleted, with the order they were of: never confirmed for another order under that id';

GRANT SELECT ON ordertimeout.purged_payments TO ordertimeout_admin;
