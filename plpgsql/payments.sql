-- PAYING -> PENDING once no payment attempt is in flight any more: the
-- order's own timeout applies again, with a new timer row for the new version
-- (due at once if cancel_at has passed). Returns false while another attempt
-- is still started.
CREATE FUNCTION ordertimeout._back_to_pending(order_id text, at timestamptz, detail jsonb)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_version integer;
    v_job_id  bigint;
    v_cancel  timestamptz;
BEGIN
    IF EXISTS (SELECT 1 FROM ordertimeout.payments AS p
                WHERE p.order_id = _back_to_pending.order_id AND p.status = 'started') THEN
        RETURN false;
    END IF;

    UPDATE ordertimeout.orders AS o
    SET status = 'PENDING',
        paying_until = NULL,
        deadline_version = o.deadline_version + 1,
        timer_job_id = nextval('public.river_job_id_seq'),
        check_job_id = NULL
    WHERE o.order_id = _back_to_pending.order_id
      AND o.status = 'PAYING'
    RETURNING o.deadline_version, o.timer_job_id, o.cancel_at INTO v_version, v_job_id, v_cancel;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    VALUES (v_job_id, 'ordertimeout_expire',
            jsonb_build_object('order_id', _back_to_pending.order_id, 'version', v_version),
            'ordertimeout_expire', 'available', v_cancel);
    PERFORM ordertimeout._log_event(_back_to_pending.order_id, 'PAYING', 'PENDING', 'payment',
        _back_to_pending.at, _back_to_pending.detail);
    PERFORM ordertimeout._wake_if_sooner(v_cancel);
    RETURN true;
END
$$;

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
BEGIN
    PERFORM ordertimeout._check_order_id(begin_payment.order_id);
    PERFORM ordertimeout._check_payment_id(begin_payment.payment_id);
    PERFORM ordertimeout._check_interval('paying_window', begin_payment.paying_window, interval '30 days', 'OT125');
    IF begin_payment.method IS NOT NULL THEN
        PERFORM ordertimeout._payment_method('method', begin_payment.method);
    END IF;

    SELECT o.status, o.expire_at, o.timer_job_id, coalesce(begin_payment.method, o.payment_method)
    INTO v_status, v_expire, v_timer, v_method
    FROM ordertimeout.orders AS o
    WHERE o.order_id = begin_payment.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', begin_payment.order_id
            USING ERRCODE = 'OT120';
    END IF;

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
      AND o.expire_at > v_now;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" changed while starting the payment', begin_payment.order_id
            USING ERRCODE = 'OT123';
    END IF;

    INSERT INTO ordertimeout.payments (payment_id, order_id, status, started_at)
    VALUES (begin_payment.payment_id, begin_payment.order_id, 'started', v_now);

    IF v_status = 'PENDING' THEN
        PERFORM ordertimeout._drop_timer(v_timer);
    END IF;
    PERFORM ordertimeout._log_event(begin_payment.order_id, v_status, 'PAYING', 'payment', v_now,
        jsonb_build_object('payment_id', begin_payment.payment_id, 'paying_until', v_until,
                           'gateway_expire_at', v_gw_expire, 'method', v_method));

    RETURN ordertimeout._order_state(begin_payment.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.begin_payment(text, text, interval, text) IS
    'PENDING -> PAYING before the buyer is sent to the gateway, with the paying window of the call, else of the payment method, else of the settings; returns gateway_expire_at, the expiry to give the gateway; refused once the order has expired; the timeout no longer applies while PAYING and never comes before gateway_expire_at + grace';

-- Money is exact: an order with an amount (and currency) is PAID only by a
-- payment of that amount in that currency. Any other payment is a conflict
-- of kind amount_mismatch, on a live order as on a cancelled one. A payment
-- without an amount (an app caller that does not know it) pays an order with
-- an amount, recorded as unverified in the event; the sidecar never confirms
-- such an order without the gateway's amount. A payment without a currency
-- is in the order's currency.
-- The one implementation of confirm_payment; cause is the events' and a new
-- conflict's cause: payment (a callback, a gateway check) or reconcile (found
-- in the gateway's records).
CREATE FUNCTION ordertimeout._confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric,
    currency   text,
    cause      text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_status     text;
    v_amount     numeric;
    v_currency   text;
    v_timer      bigint;
    v_pay_order  text;
    v_pay_status text;
    v_conflict   bigint;
    v_kind       text;
    v_mismatch   boolean;
    v_paid_cur   text;
    v_detail     jsonb;
BEGIN
    PERFORM ordertimeout._check_order_id(_confirm_payment.order_id);
    PERFORM ordertimeout._check_payment_id(_confirm_payment.payment_id);
    PERFORM ordertimeout._check_amount('amount', _confirm_payment.amount);
    IF _confirm_payment.currency IS NOT NULL AND _confirm_payment.currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be a three-letter ISO 4217 code such as "EUR", got "%"',
            left(_confirm_payment.currency, 16)
            USING ERRCODE = 'OT128';
    END IF;

    -- The order row lock serializes every transition of this order, and
    -- close_cancelled (which takes the same lock) with the conflict below.
    SELECT o.status, o.amount, o.currency, o.timer_job_id INTO v_status, v_amount, v_currency, v_timer
    FROM ordertimeout.orders AS o
    WHERE o.order_id = _confirm_payment.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', _confirm_payment.order_id
            USING ERRCODE = 'OT120';
    END IF;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = _confirm_payment.payment_id;
    IF FOUND AND v_pay_order <> _confirm_payment.order_id THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', _confirm_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    -- The same confirmation again: the same answer, nothing written.
    IF v_pay_status = 'confirmed' THEN
        RETURN 'paid';
    ELSIF v_pay_status IN ('late', 'refunded') THEN
        RETURN 'conflict';
    END IF;

    v_paid_cur := coalesce(_confirm_payment.currency, v_currency);
    v_mismatch := (_confirm_payment.amount IS NOT NULL AND v_amount IS NOT NULL AND _confirm_payment.amount <> v_amount)
               OR (v_paid_cur IS DISTINCT FROM v_currency AND v_currency IS NOT NULL);

    UPDATE ordertimeout.orders AS o
    SET status = 'PAID',
        paid_at = v_now,
        paying_until = NULL,
        deadline_version = o.deadline_version + 1,
        timer_job_id = NULL,
        check_job_id = NULL
    WHERE o.order_id = _confirm_payment.order_id
      AND o.status IN ('PENDING', 'PAYING')
      AND NOT v_mismatch;

    IF FOUND THEN
        INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
        VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'confirmed', _confirm_payment.amount,
                v_paid_cur, v_now)
        ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
        SET status = 'confirmed',
            amount = coalesce(excluded.amount, p.amount),
            currency = excluded.currency,
            confirmed_at = excluded.confirmed_at;
        PERFORM ordertimeout._drop_timer(v_timer);
        v_detail := jsonb_build_object('payment_id', _confirm_payment.payment_id, 'amount', _confirm_payment.amount,
                                       'currency', v_paid_cur);
        IF _confirm_payment.amount IS NULL AND v_amount IS NOT NULL THEN
            v_detail := v_detail || jsonb_build_object('unverified', true);
        END IF;
        PERFORM ordertimeout._log_event(_confirm_payment.order_id, v_status, 'PAID', _confirm_payment.cause, v_now, v_detail,
            webhook => true);
        -- Last, so that the stock rows stay locked only until the commit.
        PERFORM ordertimeout._consume(_confirm_payment.order_id, v_now);
        RETURN 'paid';
    END IF;

    -- Money the order cannot take (cancelled, already paid, or the wrong
    -- amount or currency): never dropped, never re-opening the order on its
    -- own. A conflict row, and a wake-up.
    v_kind := CASE
                  WHEN v_status IN ('PAID', 'REFUNDED') THEN 'double_payment'
                  WHEN v_mismatch THEN 'amount_mismatch'
                  ELSE 'late_payment'
              END;
    INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
    VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'late', _confirm_payment.amount, v_paid_cur, v_now)
    ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
    SET status = 'late',
        amount = coalesce(excluded.amount, p.amount),
        currency = excluded.currency,
        confirmed_at = excluded.confirmed_at;
    INSERT INTO ordertimeout.conflicts (order_id, payment_id, kind, amount, currency, detected_at, cause)
    VALUES (_confirm_payment.order_id, _confirm_payment.payment_id, v_kind, _confirm_payment.amount, v_paid_cur, v_now,
            _confirm_payment.cause)
    RETURNING conflict_id INTO v_conflict;

    -- A finished order with an open conflict is no longer finished: a CLOSED
    -- order goes back to CANCELLED (close_cancelled closes it again once the
    -- conflict is resolved). Touching the row of a CANCELLED order makes a
    -- concurrent close_cancelled under REPEATABLE READ fail rather than
    -- close it past this conflict.
    IF v_status IN ('CANCELLED', 'CLOSED') THEN
        UPDATE ordertimeout.orders AS o
        SET status = 'CANCELLED',
            closed_at = NULL,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = _confirm_payment.order_id;
    END IF;
    PERFORM ordertimeout._log_event(_confirm_payment.order_id, v_status,
        CASE WHEN v_status = 'CLOSED' THEN 'CANCELLED' ELSE v_status END, _confirm_payment.cause, v_now,
        jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict, 'kind', v_kind,
                           'amount', _confirm_payment.amount, 'currency', v_paid_cur),
        webhook => true);
    -- Only a wake-up: the listener reads the open conflicts from the table.
    PERFORM pg_notify('ordertimeout_conflict', '');
    IF v_status = 'PAYING' THEN
        -- this attempt is over: without another one in flight, the timeout applies again
        PERFORM ordertimeout._back_to_pending(_confirm_payment.order_id, v_now,
            jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict));
    END IF;
    RETURN 'conflict';
END
$$;

CREATE FUNCTION ordertimeout.confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric DEFAULT NULL,
    currency   text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN ordertimeout._confirm_payment(confirm_payment.order_id, confirm_payment.payment_id,
                                         confirm_payment.amount, confirm_payment.currency, 'payment');
END
$$;

COMMENT ON FUNCTION ordertimeout.confirm_payment(text, text, numeric, text) IS
    'PENDING/PAYING -> PAID by a payment of the order''s exact amount and currency (returns paid); money the order cannot take (cancelled, already paid, wrong amount or currency) is recorded as a conflict with a wake-up (returns conflict); a repeat returns the same answer and writes nothing';

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

    SELECT o.status INTO v_status
    FROM ordertimeout.orders AS o
    WHERE o.order_id = fail_payment.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', fail_payment.order_id
            USING ERRCODE = 'OT120';
    END IF;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = fail_payment.payment_id;
    IF NOT FOUND THEN
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
