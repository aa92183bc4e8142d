-- Payment attempts and late-payment conflicts.

CREATE TABLE ordertimeout.payments (
    payment_id   text        NOT NULL,
    order_id     text        NOT NULL,
    status       ordertimeout.payment_status NOT NULL,
    amount       ordertimeout.money_amount,
    started_at   timestamptz,
    confirmed_at timestamptz,
    failed_at    timestamptz,
    currency     ordertimeout.currency_code,
    method       text,
    method_recorded boolean NOT NULL DEFAULT false,
    CONSTRAINT payments_pkey PRIMARY KEY (payment_id),
    CONSTRAINT payments_order_exists
        FOREIGN KEY (order_id) REFERENCES ordertimeout.orders (order_id),
    CONSTRAINT payments_method_known
        FOREIGN KEY (method) REFERENCES ordertimeout.payment_methods (method),
    CONSTRAINT payments_payment_id_length CHECK (char_length(payment_id) BETWEEN 1 AND 128)
);

CREATE INDEX payments_order_id ON ordertimeout.payments (order_id);

COMMENT ON TABLE ordertimeout.payments IS
    'payment attempts: started by begin_payment, confirmed or failed by the gateway; late = confirmed but recorded as a conflict';
COMMENT ON COLUMN ordertimeout.payments.method IS
    'with method_recorded, the payment method of this attempt: the one begin_payment was given, else the order''s at that moment (NULL: none, the defaults); decides the close at the cancel and the late-payment policy of this payment';
COMMENT ON COLUMN ordertimeout.payments.method_recorded IS
    'whether method is recorded: false for a payment confirmed without a begin_payment, or begun before migration 000059 (unless its order had other payments: 000059 filled those from their events), for which the order''s payment_method stands until a begin_payment with another method records it';

CREATE TABLE ordertimeout.conflicts (
    conflict_id bigint      GENERATED ALWAYS AS IDENTITY,
    order_id    text        NOT NULL,
    payment_id  text        NOT NULL,
    kind        text        NOT NULL,
    amount      numeric,
    detected_at timestamptz NOT NULL,
    resolution  text,
    resolved_at timestamptz,
    resolved_by text,
    currency          text,
    state             text        NOT NULL DEFAULT 'open',
    refund_started_at timestamptz,
    refund_started_by text,
    refund_id         text,
    cause             text        NOT NULL DEFAULT 'payment',
    note              text,
    handed_over_at    timestamptz,
    handed_over_why   text,
    CONSTRAINT conflicts_pkey PRIMARY KEY (conflict_id),
    CONSTRAINT conflicts_one_per_payment UNIQUE (payment_id),
    -- A refund gives back one payment: the gateway's id of a refund recorded
    -- for one conflict is never recorded for another (finish_refund, OT177).
    CONSTRAINT conflicts_one_per_refund UNIQUE (refund_id),
    CONSTRAINT conflicts_order_exists
        FOREIGN KEY (order_id) REFERENCES ordertimeout.orders (order_id),
    CONSTRAINT conflicts_kind_known CHECK (kind IN ('late_payment', 'double_payment', 'amount_mismatch')),
    CONSTRAINT conflicts_resolution_known CHECK (resolution IN ('reinstated', 'refunded', 'manual')),
    CONSTRAINT conflicts_resolved_together CHECK ((resolution IS NULL) = (resolved_at IS NULL)),
    CONSTRAINT conflicts_amount_finite CHECK (amount >= 0 AND amount < 1000000000000000),
    CONSTRAINT conflicts_currency_iso CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT conflicts_state_known CHECK (state IN ('open', 'refunding', 'resolved')),
    CONSTRAINT conflicts_resolved_state CHECK ((state = 'resolved') = (resolution IS NOT NULL)),
    -- A refund, once started, is the only way the conflict can end.
    CONSTRAINT conflicts_refund_started_ends_refunded
        CHECK (refund_started_at IS NULL OR state = 'refunding' OR coalesce(resolution, '') = 'refunded'),
    CONSTRAINT conflicts_refunding_has_start CHECK (state <> 'refunding' OR refund_started_at IS NOT NULL),
    CONSTRAINT conflicts_note_length CHECK (char_length(note) BETWEEN 1 AND 500),
    CONSTRAINT conflicts_cause_known CHECK (cause IN ('payment', 'reconcile')),
    -- Handed to a person by the sidecar (hand_over_conflict): when, and why.
    CONSTRAINT conflicts_handed_over_together CHECK ((handed_over_at IS NULL) = (handed_over_why IS NULL)),
    CONSTRAINT conflicts_handed_over_why_length CHECK (char_length(handed_over_why) BETWEEN 1 AND 500)
);

CREATE INDEX conflicts_open
    ON ordertimeout.conflicts (detected_at)
    WHERE resolution IS NULL;

CREATE INDEX conflicts_order_id ON ordertimeout.conflicts (order_id);

COMMENT ON COLUMN ordertimeout.conflicts.state IS
    'open (waiting for a resolution), refunding (a refund was claimed: only finish_refund can end it), resolved';
COMMENT ON COLUMN ordertimeout.conflicts.cause IS
    'how the money was found: payment (confirm_payment: a callback or a gateway check) or reconcile (the gateway''s records: a lost callback)';
COMMENT ON COLUMN ordertimeout.conflicts.refund_id IS 'the gateway''s id of the refund, recorded by finish_refund';
COMMENT ON COLUMN ordertimeout.conflicts.note IS 'the note of whoever resolved it (resolve_conflict''s note), if any';
COMMENT ON COLUMN ordertimeout.conflicts.handed_over_at IS
    'when the sidecar handed the open conflict to a person (hand_over_conflict): from then on it no longer acts on it (conflicts_to_resolve leaves it out) until a person resolves it or claims its refund';
COMMENT ON COLUMN ordertimeout.conflicts.handed_over_why IS
    'why the sidecar handed the conflict to a person (the gateway''s answer that it could not act on)';
COMMENT ON COLUMN ordertimeout.payments.currency IS
    'the payment''s currency as confirmed (the order''s when the caller gave none)';

COMMENT ON TABLE ordertimeout.conflicts IS
    'money that arrived for an order that can no longer take it: paid after the cancel (late_payment), paid twice (double_payment) or paid the wrong amount (amount_mismatch)';

-- Continuous reconciliation: how far each source of gateway records has been
-- reconciled (reconcile_payments with a source advances it in the same
-- transaction).
CREATE TABLE ordertimeout.reconcile_watermarks (
    source     text        NOT NULL,
    watermark  timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT reconcile_watermarks_pkey PRIMARY KEY (source),
    CONSTRAINT reconcile_watermarks_source_plain CHECK (source ~ '^[a-z][a-z0-9_:.-]{0,63}$')
);

COMMENT ON TABLE ordertimeout.reconcile_watermarks IS
    'per source of gateway records (e.g. gateway:fake), the end of the last period reconciled';

-- The payment ids of purged orders (purge_orders), kept as the hold of a spent
-- coupon is: the id of a purged order is free again, and a callback or a
-- gateway record of the old order's payment, arriving later, must not pay a
-- new order under that id (_confirm_payment, OT176; reconcile_payments,
-- other_order). About 100 bytes a payment, against the 2 kB or so an order
-- keeps with its items, payments and events.
CREATE TABLE ordertimeout.purged_payments (
    payment_id text        NOT NULL,
    order_id   text        NOT NULL,
    purged_at  timestamptz NOT NULL,
    CONSTRAINT purged_payments_pkey PRIMARY KEY (payment_id)
);

COMMENT ON TABLE ordertimeout.purged_payments IS
    'payment ids of orders that purge_orders deleted, with the order they were of: never confirmed for another order under that id';

-- The refund ids of the conflicts purge_orders deleted with their orders:
-- one refund gives back one payment (conflicts_one_per_refund), and that
-- rule must outlive the conflict that recorded the refund, or a gateway
-- answering a later conflict with the same refund would have that payment
-- recorded as refunded with nothing given back (finish_refund, OT177).
CREATE TABLE ordertimeout.purged_refunds (
    refund_id   text        NOT NULL,
    conflict_id bigint      NOT NULL,
    order_id    text        NOT NULL,
    payment_id  text        NOT NULL,
    purged_at   timestamptz NOT NULL,
    CONSTRAINT purged_refunds_pkey PRIMARY KEY (refund_id)
);

-- The order ids purge_orders deleted in the last hour, and those a new order
-- took within 10 minutes of their purge: a payment of the purged order
-- that this database never saw (its callback lost) and that the gateway lists
-- under the order id is the earlier buyer's money when it was taken before
-- the purge (allowing the 5 minutes two clocks may differ), and
-- reconcile_payments must not confirm it for the new order (other_order).
-- A payment taken earlier than 5 minutes before the new order was created is
-- refused by that rule alone, so a row matters only for an order given the id
-- within 10 minutes of the purge; purge_orders deletes the others once they
-- are an hour old (an uncommitted create_order started within the 10
-- minutes is then long over).
CREATE TABLE ordertimeout.purged_orders (
    order_id  text        NOT NULL,
    purged_at timestamptz NOT NULL,
    CONSTRAINT purged_orders_pkey PRIMARY KEY (order_id)
);

CREATE INDEX purged_orders_purged_at ON ordertimeout.purged_orders (purged_at);

COMMENT ON TABLE ordertimeout.purged_orders IS
    'order ids purge_orders deleted lately, with the moment: a payment unknown here that the gateway took before it (5 minutes allowed) is not confirmed for a new order under that id';

COMMENT ON TABLE ordertimeout.purged_refunds IS
    'refund ids of the conflicts that purge_orders deleted, with the conflict, order and payment they gave back: never recorded for another conflict';
