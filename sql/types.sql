-- Composite result of the functions that return one order. Clients read it as
-- plain columns: SELECT * FROM ordertimeout.order_info('A1').

CREATE TYPE ordertimeout.order_state AS (
    order_id          text,
    status            text,
    created           boolean,
    created_at        timestamptz,
    expire_at         timestamptz,
    cancel_at         timestamptz,
    paying_until      timestamptz,
    paid_at           timestamptz,
    cancelled_at      timestamptz,
    closed_at         timestamptz,
    cancel_cause      text,
    deadline_version  integer,
    amount            numeric,
    currency          text,
    items             jsonb,
    coupon_id         text,
    points_account    text,
    points            bigint,
    payment_attempted boolean,
    open_conflicts    integer,
    payment_method    text,
    gateway_expire_at timestamptz
);

COMMENT ON TYPE ordertimeout.order_state IS
    'one order as the API returns it; created is true only in the create_order call that inserted it';
