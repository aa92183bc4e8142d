CREATE FUNCTION ordertimeout.confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric DEFAULT NULL,
    currency   text DEFAULT NULL,
    paid_at    timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN ordertimeout._confirm_payment(confirm_payment.order_id, confirm_payment.payment_id,
                                         confirm_payment.amount, confirm_payment.currency, 'payment',
                                         confirm_payment.paid_at);
END
$$;

COMMENT ON FUNCTION ordertimeout.confirm_payment(text, text, numeric, text, timestamptz) IS
    'PENDING/PAYING -> PAID by a payment of the order''s exact amount and currency (returns paid); money the order cannot take (cancelled, already paid, wrong amount or currency) is recorded as a conflict with a wake-up (returns conflict); a repeat returns the same answer and writes nothing; paid_at, the gateway''s time of the payment, if given: a payment not begun for the order and taken more than 5 minutes before it was created, or before an earlier order under its id was purged, is an earlier order''s (OT178, nothing written)';
