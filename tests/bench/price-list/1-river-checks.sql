-- Measurement only, never a migration: see ../create-price-list.sh.
ALTER TABLE public.river_job DROP CONSTRAINT finalized_or_finalized_at_null, DROP CONSTRAINT queue_length,
  DROP CONSTRAINT kind_length, DROP CONSTRAINT priority_in_range, DROP CONSTRAINT max_attempts_is_positive;
