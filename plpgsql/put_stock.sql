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
