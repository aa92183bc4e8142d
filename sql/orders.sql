-- Orders and their items.

CREATE TABLE ordertimeout.orders (
    order_id          text        NOT NULL,
    status            ordertimeout.order_status NOT NULL DEFAULT 'PENDING',
    created_at        timestamptz NOT NULL,
    expire_at         timestamptz NOT NULL,
    cancel_at         timestamptz NOT NULL,
    paying_until      timestamptz,
    paid_at           timestamptz,
    cancelled_at      timestamptz,
    closed_at         timestamptz,
    cancel_cause      ordertimeout.cancel_cause,
    cancel_reason     text,
    deadline_version  integer     NOT NULL DEFAULT 1,
    timer_job_id      bigint,
    check_job_id      bigint,
    payment_attempted boolean     NOT NULL DEFAULT false,
    precheck          ordertimeout.precheck_policy,
    amount            ordertimeout.money_amount,
    currency          ordertimeout.currency_code,
    coupon_id         text,
    points_account    text,
    points            bigint,
    request           jsonb       NOT NULL,
    payment_method    text,
    gateway_expire_at timestamptz,
    CONSTRAINT orders_pkey PRIMARY KEY (order_id),
    CONSTRAINT orders_order_id_length CHECK (char_length(order_id) BETWEEN 1 AND 64),
    CONSTRAINT orders_cancel_not_before_expire CHECK (cancel_at >= expire_at),
    CONSTRAINT orders_expire_after_create CHECK (expire_at > created_at),
    CONSTRAINT orders_not_paid_and_cancelled CHECK (paid_at IS NULL OR cancelled_at IS NULL),
    CONSTRAINT orders_paid_has_paid_at CHECK (status NOT IN ('PAID', 'REFUNDED') OR paid_at IS NOT NULL),
    CONSTRAINT orders_cancelled_has_cancelled_at
        CHECK (status NOT IN ('CANCELLED', 'CLOSED') OR cancelled_at IS NOT NULL),
    CONSTRAINT orders_paying_has_paying_until CHECK (status <> 'PAYING' OR paying_until IS NOT NULL),
    CONSTRAINT orders_points_with_account CHECK ((points IS NULL) = (points_account IS NULL)),
    CONSTRAINT orders_payment_method_known
        FOREIGN KEY (payment_method) REFERENCES ordertimeout.payment_methods (method),
    CONSTRAINT orders_gateway_expiry_before_cancel CHECK (gateway_expire_at <= cancel_at)
) WITH (fillfactor = 80);

COMMENT ON TABLE ordertimeout.orders IS 'one row per order, keyed by the caller''s order id';
COMMENT ON COLUMN ordertimeout.orders.cancel_at IS 'expire_at + grace: when a timeout may cancel the order';
COMMENT ON COLUMN ordertimeout.orders.deadline_version IS
    'bumped on every state or deadline change; a timer row carries the version it was made for and acts only if it still matches (fencing)';
COMMENT ON COLUMN ordertimeout.orders.timer_job_id IS 'the River job row currently acting as this order''s timer';
COMMENT ON COLUMN ordertimeout.orders.check_job_id IS
    'the River job asking the payment gateway before this order is cancelled, when its precheck policy requires one';
COMMENT ON COLUMN ordertimeout.orders.gateway_expire_at IS
    'the deadline the gateway must enforce for the payment begun last (begin_payment returns it): pass it as the gateway''s expiry; cancel_at is never before it plus grace';
COMMENT ON COLUMN ordertimeout.orders.request IS 'the normalized create_order arguments, compared when the same order id is created again';

-- The live work only: cost does not grow with finished orders. Orders waiting
-- for a gateway check are left out: their check job acts for them.
CREATE INDEX orders_pending_cancel_at
    ON ordertimeout.orders (cancel_at)
    WHERE status = 'PENDING' AND check_job_id IS NULL;

-- Orders waiting for a gateway check, for the rescue of lost check jobs.
CREATE INDEX orders_awaiting_check
    ON ordertimeout.orders (cancel_at)
    WHERE status = 'PENDING' AND check_job_id IS NOT NULL;

CREATE INDEX orders_cancelled_at
    ON ordertimeout.orders (cancelled_at)
    WHERE status = 'CANCELLED';

CREATE INDEX orders_paying_until
    ON ordertimeout.orders (paying_until)
    WHERE status = 'PAYING';

CREATE TABLE ordertimeout.order_items (
    order_id text    NOT NULL,
    sku      text    NOT NULL,
    qty      integer NOT NULL,
    CONSTRAINT order_items_pkey PRIMARY KEY (order_id, sku),
    CONSTRAINT order_items_order_exists
        FOREIGN KEY (order_id) REFERENCES ordertimeout.orders (order_id),
    CONSTRAINT order_items_qty_positive CHECK (qty > 0)
);

COMMENT ON TABLE ordertimeout.order_items IS 'what an order reserved: qty units of each SKU';
