CREATE FUNCTION ordertimeout.put_stock(
    sku text,
    qty bigint)
RETURNS ordertimeout.stock
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.stock;
BEGIN
    IF put_stock.sku IS NULL THEN
        RAISE EXCEPTION 'sku must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(put_stock.sku, 64) THEN
        RAISE EXCEPTION 'sku must be 1 to 64 characters without control, format or line-separator characters'
            USING ERRCODE = 'OT142';
    END IF;
    IF put_stock.qty IS NULL THEN
        RAISE EXCEPTION 'qty must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_stock.qty NOT BETWEEN 0 AND 1000000000000000 THEN
        RAISE EXCEPTION 'qty must be between 0 and 10^15, got %', put_stock.qty
            USING ERRCODE = 'OT143';
    END IF;

    INSERT INTO ordertimeout.stock AS s (sku, available)
    VALUES (put_stock.sku, put_stock.qty)
    ON CONFLICT ON CONSTRAINT stock_pkey DO UPDATE
    SET available = excluded.available
    RETURNING s.* INTO v_row;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.put_stock(text, bigint) IS
    'sets the units of sku available to order (creating the sku); reserved and sold are not touched; safe to repeat';

CREATE FUNCTION ordertimeout.put_points(
    account_id text,
    balance    bigint)
RETURNS ordertimeout.points_accounts
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.points_accounts;
BEGIN
    IF put_points.account_id IS NULL THEN
        RAISE EXCEPTION 'account_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(put_points.account_id, 64) THEN
        RAISE EXCEPTION 'account_id must be 1 to 64 characters without control, format or line-separator characters'
            USING ERRCODE = 'OT146';
    END IF;
    IF put_points.balance IS NULL THEN
        RAISE EXCEPTION 'balance must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_points.balance NOT BETWEEN 0 AND 1000000000000000 THEN
        RAISE EXCEPTION 'balance must be between 0 and 10^15, got %', put_points.balance
            USING ERRCODE = 'OT143';
    END IF;

    INSERT INTO ordertimeout.points_accounts AS a (account_id, balance)
    VALUES (put_points.account_id, put_points.balance)
    ON CONFLICT ON CONSTRAINT points_accounts_pkey DO UPDATE
    SET balance = excluded.balance
    WHERE a.held <= excluded.balance
    RETURNING a.* INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'balance % is below the % points that live orders hold on account "%"',
            put_points.balance,
            (SELECT a.held FROM ordertimeout.points_accounts AS a WHERE a.account_id = put_points.account_id),
            put_points.account_id
            USING ERRCODE = 'OT147';
    END IF;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.put_points(text, bigint) IS
    'sets the points balance of an account (creating it); never below what live orders hold; safe to repeat';

CREATE FUNCTION ordertimeout.configure(
    default_timeout interval DEFAULT NULL,
    grace           interval DEFAULT NULL,
    paying_window   interval DEFAULT NULL,
    precheck        text DEFAULT NULL,
    late_payment    text DEFAULT NULL,
    webhooks        boolean DEFAULT NULL,
    remind_before   interval DEFAULT NULL,
    paused          boolean DEFAULT NULL)
RETURNS ordertimeout.settings
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row   ordertimeout.settings;
    v_now   timestamptz := clock_timestamp();
    v_actor text := ordertimeout._actor();
BEGIN
    PERFORM ordertimeout._check_interval('default_timeout', configure.default_timeout, interval '30 days', 'OT145');
    PERFORM ordertimeout._check_interval('grace', configure.grace, interval '1 day', 'OT145', allow_zero => true);
    PERFORM ordertimeout._check_interval('paying_window', configure.paying_window, interval '30 days', 'OT145');
    IF configure.precheck NOT IN ('attempted', 'always', 'never') THEN
        RAISE EXCEPTION 'precheck must be "attempted", "always" or "never", got "%"', configure.precheck
            USING ERRCODE = 'OT145';
    END IF;
    IF configure.late_payment NOT IN ('reinstate', 'refund', 'manual') THEN
        RAISE EXCEPTION 'late_payment must be "reinstate", "refund" or "manual", got "%"', configure.late_payment
            USING ERRCODE = 'OT145';
    END IF;
    -- 0 turns reminders off.
    PERFORM ordertimeout._check_interval('remind_before', configure.remind_before, interval '30 days', 'OT145',
                                         allow_zero => true);

    UPDATE ordertimeout.settings AS s
    SET default_timeout = coalesce(configure.default_timeout, s.default_timeout),
        grace = coalesce(configure.grace, s.grace),
        paying_window = coalesce(configure.paying_window, s.paying_window),
        precheck = coalesce(configure.precheck, s.precheck),
        late_payment = coalesce(configure.late_payment, s.late_payment),
        webhooks = coalesce(configure.webhooks, s.webhooks),
        remind_before = CASE
                            WHEN configure.remind_before IS NULL THEN s.remind_before
                            WHEN configure.remind_before = interval '0' THEN NULL
                            ELSE configure.remind_before
                        END,
        paused = coalesce(configure.paused, s.paused),
        paused_at = CASE WHEN configure.paused AND NOT s.paused THEN v_now ELSE s.paused_at END,
        paused_by = CASE WHEN configure.paused AND NOT s.paused THEN v_actor ELSE s.paused_by END,
        resumed_at = CASE WHEN NOT configure.paused AND s.paused THEN v_now ELSE s.resumed_at END
    RETURNING s.* INTO v_row;
    IF configure.paused IS FALSE THEN
        -- The backlog is due now: wake the sleeping sweepers.
        PERFORM pg_notify('ordertimeout_wake', '');
    END IF;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.configure(interval, interval, interval, text, text, boolean, interval, boolean) IS
    'changes settings; a NULL argument leaves that setting as it is; paused => true stops every timeout cancel until paused => false; returns the settings';
