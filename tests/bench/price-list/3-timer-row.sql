-- Measurement only, never a migration: see ../create-price-list.sh.
CREATE OR REPLACE FUNCTION ordertimeout._schedule_timer(job_id bigint, order_id text, version integer, at timestamptz)
RETURNS void LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$ BEGIN NULL; END $$;
