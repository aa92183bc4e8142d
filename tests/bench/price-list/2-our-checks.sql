-- Measurement only, never a migration: see ../create-price-list.sh.
DO $$ DECLARE r record; BEGIN
FOR r IN SELECT conname, conrelid::regclass AS t FROM pg_constraint WHERE contype = 'c'
  AND conrelid IN ('ordertimeout.orders'::regclass, 'ordertimeout.order_items'::regclass, 'ordertimeout.stock'::regclass) LOOP
  EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname);
END LOOP; END $$;
