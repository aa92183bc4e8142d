CREATE FUNCTION ordertimeout.fail_payment(
    order_id   text,
    payment_id text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_status     text;
    v_pay_order  text;
    v_pay_status text;
BEGIN
    PERFORM ordertimeout._check_order_id(fail_payment.order_id);
    PERFORM ordertimeout._check_payment_id(fail_payment.payment_id);

    v_status := (ordertimeout._lock_order(fail_payment.order_id)).status;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = fail_payment.payment_id;
    IF NOT FOUND THEN
        -- A payment of a purged order (purged_payments) is named as such
        -- (OT176), as begin_payment and confirm_payment name it.
        PERFORM ordertimeout._refuse_purged_payment(fail_payment.payment_id, fail_payment.order_id);
        RAISE EXCEPTION 'payment_id "%" is unknown', fail_payment.payment_id
            USING ERRCODE = 'OT127';
    END IF;
    IF v_pay_order <> fail_payment.order_id THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', fail_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    IF v_pay_status <> 'started' THEN
        RETURN 'ignored';
    END IF;

    UPDATE ordertimeout.payments AS p
    SET status = 'failed',
        failed_at = v_now
    WHERE p.payment_id = fail_payment.payment_id
      AND p.status = 'started';

    IF v_status <> 'PAYING' THEN
        RETURN 'ignored';
    END IF;
    IF ordertimeout._back_to_pending(fail_payment.order_id, v_now,
           jsonb_build_object('payment_id', fail_payment.payment_id, 'failed', true)) THEN
        RETURN 'pending';
    END IF;
    RETURN 'paying';   -- another attempt is still in flight
END
$$;

COMMENT ON FUNCTION ordertimeout.fail_payment(text, text) IS
    'marks a started payment failed; PAYING -> PENDING when no other attempt is in flight (returns pending, paying or ignored)';
