CREATE FUNCTION ordertimeout.reconcile_watermark(source text)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT w.watermark FROM ordertimeout.reconcile_watermarks AS w WHERE w.source = reconcile_watermark.source);
END
$$;

COMMENT ON FUNCTION ordertimeout.reconcile_watermark(text) IS
    'the end of the last period reconciled for source (NULL: never)';
