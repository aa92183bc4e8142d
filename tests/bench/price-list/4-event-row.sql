-- Measurement only, never a migration: see ../create-price-list.sh.
CREATE OR REPLACE FUNCTION ordertimeout._log_event(order_id text, from_status text, to_status text, cause text,
  at timestamptz, detail jsonb DEFAULT NULL, webhook boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$ BEGIN RETURN 0; END $$;
