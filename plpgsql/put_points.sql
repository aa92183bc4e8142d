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
