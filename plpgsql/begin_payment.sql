-- The paying window is the call's, else the payment method's (the call's
-- method, else the order's), else settings.paying_window. The gateway must
-- enforce gateway_expire_at = now + window: the shop passes that moment to
-- the gateway as the payment's expiry, so both clocks agree. The payment
-- check runs at paying_until = gateway_expire_at + grace, and the order's
-- cancel_at is moved to at least that moment too: ordertimeout never cancels
-- an order while the gateway may still take its money.
CREATE FUNCTION ordertimeout.begin_payment(
    order_id      text,
    payment_id    text,
    paying_window interval DEFAULT NULL,
    method        text DEFAULT NULL)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now         timestamptz := clock_timestamp();
    v_window      interval;
    v_status      text;
    v_expire      timestamptz;
    v_timer       bigint;
    v_pay_order   text;
    v_pay_status  text;
    v_until       timestamptz;
    v_gw_expire   timestamptz;
    v_job_id      bigint;
    v_method      text;
    v_grace       interval;
    v_order       ordertimeout.orders;
    v_event_id    bigint;
BEGIN
    -- Each check helper runs only when its argument fails the quick test
    -- (see plpgsql/checks.sql), and raises the error naming the field.
    IF NOT ordertimeout._is_identifier(begin_payment.order_id, 64) THEN
        PERFORM ordertimeout._check_order_id(begin_payment.order_id);
    END IF;
    IF NOT ordertimeout._is_identifier(begin_payment.payment_id, 128) THEN
        PERFORM ordertimeout._check_payment_id(begin_payment.payment_id);
    END IF;
    IF NOT ordertimeout._is_duration(begin_payment.paying_window, interval '30 days') THEN
        PERFORM ordertimeout._check_interval('paying_window', begin_payment.paying_window, interval '30 days', 'OT125');
    END IF;
    IF begin_payment.method IS NOT NULL THEN
        PERFORM ordertimeout._payment_method('method', begin_payment.method);
    END IF;

    v_order := ordertimeout._lock_order(begin_payment.order_id);
    v_status := v_order.status;
    v_expire := v_order.expire_at;
    v_timer := v_order.timer_job_id;
    v_method := coalesce(begin_payment.method, v_order.payment_method);

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = begin_payment.payment_id;
    IF FOUND THEN
        IF v_pay_order <> begin_payment.order_id THEN
            RAISE EXCEPTION 'payment_id "%" belongs to another order', begin_payment.payment_id
                USING ERRCODE = 'OT124';
        END IF;
        IF v_status = 'PAYING' AND v_pay_status = 'started' THEN
            RETURN ordertimeout._order_state(begin_payment.order_id, false);   -- the same call again
        END IF;
        RAISE EXCEPTION 'payment_id "%" is already %; order "%" is %',
            begin_payment.payment_id, v_pay_status, begin_payment.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;
    -- No row: a payment id of a purged order is not a new payment's either
    -- (a late callback of the old one would then pay this order).
    IF EXISTS (SELECT 1 FROM ordertimeout.purged_payments AS g WHERE g.payment_id = begin_payment.payment_id) THEN
        PERFORM ordertimeout._refuse_purged_payment(begin_payment.payment_id, begin_payment.order_id);
    END IF;

    IF v_status NOT IN ('PENDING', 'PAYING') THEN
        RAISE EXCEPTION 'order "%" is %: it takes no payment', begin_payment.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;
    IF v_expire <= v_now THEN
        RAISE EXCEPTION 'order "%" expired at %: start no payment for it', begin_payment.order_id, v_expire
            USING ERRCODE = 'OT122';
    END IF;

    SELECT coalesce(begin_payment.paying_window, m.paying_window, s.paying_window), s.grace
    INTO v_window, v_grace
    FROM ordertimeout.settings AS s
    LEFT JOIN ordertimeout.payment_methods AS m ON m.method = v_method;

    -- A payment whose method is not recorded (confirmed without a begin, or
    -- begun before migration 000059 on an order with no other payment)
    -- reads as the order's method, which is its own until this attempt
    -- changes it: record it first, so that neither its close nor the policy
    -- of its conflict changes. Only when the method changes, so most calls
    -- skip it.
    IF v_method IS DISTINCT FROM v_order.payment_method THEN
        UPDATE ordertimeout.payments AS p
        SET method = v_order.payment_method,
            method_recorded = true
        WHERE p.order_id = begin_payment.order_id
          AND NOT p.method_recorded;
    END IF;

    -- The payment check at paying_until: the sidecar asks the gateway.
    v_gw_expire := v_now + v_window;
    v_until := v_gw_expire + v_grace;
    v_job_id := ordertimeout._insert_job(
        'ordertimeout_payment_check',
        jsonb_build_object('order_id', begin_payment.order_id, 'payment_id', begin_payment.payment_id),
        'ordertimeout',
        v_until);

    UPDATE ordertimeout.orders AS o
    SET status = 'PAYING',
        paying_until = greatest(o.paying_until, v_until),
        gateway_expire_at = greatest(o.gateway_expire_at, v_gw_expire),
        cancel_at = greatest(o.cancel_at, v_until),
        payment_method = v_method,
        payment_attempted = true,
        deadline_version = o.deadline_version + 1,
        timer_job_id = v_job_id,
        check_job_id = NULL
    WHERE o.order_id = begin_payment.order_id
      AND o.status IN ('PENDING', 'PAYING')
      AND o.expire_at > v_now
    RETURNING o.* INTO v_order;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" changed while starting the payment', begin_payment.order_id
            USING ERRCODE = 'OT123';
    END IF;

    -- A row under this payment_id now is another order's, written since the
    -- look above (two orders given the same payment_id at once): every
    -- transition of this order holds its lock, so none of ours can be.
    INSERT INTO ordertimeout.payments (payment_id, order_id, status, started_at, method, method_recorded)
    VALUES (begin_payment.payment_id, begin_payment.order_id, 'started', v_now, v_method, true)
    ON CONFLICT ON CONSTRAINT payments_pkey DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', begin_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;

    IF v_status = 'PENDING' THEN
        PERFORM ordertimeout._drop_timer(v_timer);
    END IF;
    v_event_id := ordertimeout._log_event(begin_payment.order_id, v_status, 'PAYING', 'payment', v_now,
        jsonb_build_object('payment_id', begin_payment.payment_id, 'paying_until', v_until,
                           'gateway_expire_at', v_gw_expire, 'method', v_method));

    -- The answer from the row the UPDATE returned: its items are the
    -- normalized list create_order stored in request (the same objects, in
    -- the same sku order, as _order_state aggregates from order_items); only
    -- the open conflicts need a look. One difference: the list is in sku
    -- order by the collation of the day the order was created, so after a
    -- change of the database's collation (a dump restored under another one,
    -- a glibc or ICU upgrade) an order created before it can list its items
    -- here in the old order where order_info sorts again; create_order's own
    -- answer and its idempotency check already hold the order to that stored
    -- list.
    RETURN ordertimeout._state_of(
        v_order, false, v_order.request -> 'items',
        (SELECT count(*)::integer
           FROM ordertimeout.conflicts AS c
          WHERE c.order_id = begin_payment.order_id
            AND c.resolution IS NULL));
END
$$;

COMMENT ON FUNCTION ordertimeout.begin_payment(text, text, interval, text) IS
    'PENDING -> PAYING before the buyer is sent to the gateway, with the paying window of the call, else of the payment method, else of the settings; returns gateway_expire_at, the expiry to give the gateway; refused once the order has expired; the timeout no longer applies while PAYING and never comes before gateway_expire_at + grace';
