CREATE FUNCTION ordertimeout.put_payment_method(
    method        text,
    paying_window interval,
    gateway_close boolean DEFAULT true,
    late_payment  text DEFAULT NULL)
RETURNS ordertimeout.payment_methods
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.payment_methods;
BEGIN
    IF put_payment_method.method IS NULL THEN
        RAISE EXCEPTION 'method must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_payment_method.method !~ '^[a-z][a-z0-9_]{0,31}$' THEN
        RAISE EXCEPTION 'method must be 1 to 32 lower-case letters, digits or _, starting with a letter, got "%"',
            ordertimeout._shown(put_payment_method.method, 64)
            USING ERRCODE = 'OT161';
    END IF;
    IF put_payment_method.paying_window IS NULL THEN
        RAISE EXCEPTION 'paying_window must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    PERFORM ordertimeout._check_interval('paying_window', put_payment_method.paying_window, interval '30 days', 'OT162');
    IF put_payment_method.gateway_close IS NULL THEN
        RAISE EXCEPTION 'gateway_close must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_payment_method.late_payment NOT IN ('reinstate', 'refund', 'manual') THEN
        RAISE EXCEPTION 'late_payment must be "reinstate", "refund", "manual" or NULL (settings.late_payment), got "%"',
            ordertimeout._shown(put_payment_method.late_payment, 32)
            USING ERRCODE = 'OT163';
    END IF;

    INSERT INTO ordertimeout.payment_methods AS m (method, paying_window, gateway_close, late_payment)
    VALUES (put_payment_method.method, put_payment_method.paying_window, put_payment_method.gateway_close,
            put_payment_method.late_payment)
    ON CONFLICT ON CONSTRAINT payment_methods_pkey DO UPDATE
    SET paying_window = excluded.paying_window,
        gateway_close = excluded.gateway_close,
        late_payment = excluded.late_payment
    RETURNING m.* INTO v_row;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.put_payment_method(text, interval, boolean, text) IS
    'creates or changes a payment method: its paying window (at most 30 days), whether a cancel closes the payment at the gateway, and its late-payment policy (NULL: settings.late_payment); safe to repeat';
