-- Coupon and points holds: what an order reserved besides stock.

CREATE TABLE ordertimeout.coupon_holds (
    order_id    text        NOT NULL,
    coupon_id   text        NOT NULL,
    held_at     timestamptz NOT NULL,
    used_at     timestamptz,
    released_at timestamptz,
    CONSTRAINT coupon_holds_pkey PRIMARY KEY (order_id),
    CONSTRAINT coupon_holds_coupon_id_length CHECK (char_length(coupon_id) BETWEEN 1 AND 64),
    CONSTRAINT coupon_holds_used_or_released CHECK (used_at IS NULL OR released_at IS NULL)
);

-- A coupon is held by at most one order that has not released it.
CREATE UNIQUE INDEX coupon_holds_one_live_order
    ON ordertimeout.coupon_holds (coupon_id)
    WHERE released_at IS NULL;

COMMENT ON TABLE ordertimeout.coupon_holds IS 'a coupon held by an order: used when it is paid, released when it is cancelled';

CREATE TABLE ordertimeout.points_accounts (
    account_id text   NOT NULL,
    balance    bigint NOT NULL DEFAULT 0,
    held       bigint NOT NULL DEFAULT 0,
    CONSTRAINT points_accounts_pkey PRIMARY KEY (account_id),
    CONSTRAINT points_accounts_account_id_length CHECK (char_length(account_id) BETWEEN 1 AND 64),
    CONSTRAINT points_accounts_balance_not_negative CHECK (balance >= 0),
    CONSTRAINT points_accounts_held_not_negative CHECK (held >= 0),
    CONSTRAINT points_accounts_held_within_balance CHECK (held <= balance)
) WITH (fillfactor = 70);

COMMENT ON TABLE ordertimeout.points_accounts IS 'loyalty points (or stored balance) per account; held points are promised to live orders';

CREATE TABLE ordertimeout.points_holds (
    order_id    text        NOT NULL,
    account_id  text        NOT NULL,
    points      bigint      NOT NULL,
    held_at     timestamptz NOT NULL,
    used_at     timestamptz,
    released_at timestamptz,
    CONSTRAINT points_holds_pkey PRIMARY KEY (order_id),
    CONSTRAINT points_holds_points_positive CHECK (points > 0),
    CONSTRAINT points_holds_used_or_released CHECK (used_at IS NULL OR released_at IS NULL)
);

COMMENT ON TABLE ordertimeout.points_holds IS 'points an order holds: spent when it is paid, released when it is cancelled';
