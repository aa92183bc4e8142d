-- Payment attempts and late-payment conflicts.

CREATE TABLE ordertimeout.payments (
    payment_id   text        NOT NULL,
    order_id     text        NOT NULL,
    status       text        NOT NULL,
    amount       numeric,
    started_at   timestamptz,
    confirmed_at timestamptz,
    failed_at    timestamptz,
    CONSTRAINT payments_pkey PRIMARY KEY (payment_id),
    CONSTRAINT payments_order_exists
        FOREIGN KEY (order_id) REFERENCES ordertimeout.orders (order_id),
    CONSTRAINT payments_payment_id_length CHECK (char_length(payment_id) BETWEEN 1 AND 128),
    CONSTRAINT payments_status_known
        CHECK (status IN ('started', 'confirmed', 'failed', 'late', 'refunded')),
    CONSTRAINT payments_amount_not_negative CHECK (amount >= 0)
);

CREATE INDEX payments_order_id ON ordertimeout.payments (order_id);

COMMENT ON TABLE ordertimeout.payments IS
    'payment attempts: started by begin_payment, confirmed or failed by the gateway; late = confirmed but recorded as a conflict';

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
    CONSTRAINT conflicts_pkey PRIMARY KEY (conflict_id),
    CONSTRAINT conflicts_one_per_payment UNIQUE (payment_id),
    CONSTRAINT conflicts_order_exists
        FOREIGN KEY (order_id) REFERENCES ordertimeout.orders (order_id),
    CONSTRAINT conflicts_kind_known CHECK (kind IN ('late_payment', 'double_payment', 'amount_mismatch')),
    CONSTRAINT conflicts_resolution_known CHECK (resolution IN ('reinstated', 'refunded', 'manual')),
    CONSTRAINT conflicts_resolved_together CHECK ((resolution IS NULL) = (resolved_at IS NULL))
);

CREATE INDEX conflicts_open
    ON ordertimeout.conflicts (detected_at)
    WHERE resolution IS NULL;

CREATE INDEX conflicts_order_id ON ordertimeout.conflicts (order_id);

COMMENT ON TABLE ordertimeout.conflicts IS
    'money that arrived for an order that can no longer take it: paid after the cancel (late_payment), paid twice (double_payment) or paid the wrong amount (amount_mismatch)';
