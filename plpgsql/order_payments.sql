CREATE FUNCTION ordertimeout.order_payments(order_id text)
RETURNS TABLE (
    payment_id   text,
    status       text,
    amount       numeric,
    started_at   timestamptz,
    confirmed_at timestamptz,
    failed_at    timestamptz,
    currency     text,
    method       text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._require_order(order_payments.order_id);
    RETURN QUERY
    SELECT p.payment_id, p.status::text, p.amount::numeric, p.started_at, p.confirmed_at, p.failed_at,
           p.currency::text, ordertimeout._method_of(p, o.payment_method)
    FROM ordertimeout.payments AS p
    JOIN ordertimeout.orders AS o ON o.order_id = p.order_id
    WHERE p.order_id = order_payments.order_id
    ORDER BY coalesce(p.started_at, p.confirmed_at), p.payment_id;
END
$$;

COMMENT ON FUNCTION ordertimeout.order_payments(text) IS
    'the payment attempts of one order, each with the currency the gateway confirmed and the payment method that decides for it: the one begin_payment was given, else the order''s at that moment (NULL: none, the defaults), or the order''s where that is not recorded (payments.method_recorded: a payment confirmed without a begin_payment, or begun before migration 000059)';
