-- The refund ids of the conflicts purge_orders deletes with their orders
-- (sql/payments.sql), readable by the administrator like every table
-- (sql/grants.sql). Purges before this migration kept none: a refund id of a
-- conflict they deleted is refused for another conflict no longer.
CREATE TABLE ordertimeout.purged_refunds (
    refund_id   text        NOT NULL,
    conflict_id bigint      NOT NULL,
    order_id    text        NOT NULL,
    payment_id  text        NOT NULL,
    purged_at   timestamptz NOT NULL,
    CONSTRAINT purged_refunds_pkey PRIMARY KEY (refund_id)
);

COMMENT ON TABLE ordertimeout.purged_refunds IS
    'refund ids of the conflicts that purge_orders deleted, with the conflict, order and payment they gave back: never recorded for another conflict';

GRANT SELECT ON ordertimeout.purged_refunds TO ordertimeout_admin;
