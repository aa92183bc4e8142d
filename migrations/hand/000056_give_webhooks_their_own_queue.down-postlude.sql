-- Back to queue ordertimeout, which the sidecar of 000055 serves.
UPDATE public.river_job
   SET queue = 'ordertimeout'
 WHERE queue = 'ordertimeout_webhook';
