-- Deliveries waiting in queue ordertimeout move to their own queue; one
-- running now finishes (and is retried) where it is.
UPDATE public.river_job
   SET queue = 'ordertimeout_webhook'
 WHERE queue = 'ordertimeout'
   AND kind = 'ordertimeout_webhook'
   AND state IN ('available', 'scheduled', 'retryable', 'pending');
