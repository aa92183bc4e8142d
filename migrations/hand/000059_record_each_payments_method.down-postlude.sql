-- The functions and the view of 000058 no longer read it: the close at the
-- cancel and the late-payment policy go by the order's last payment method
-- again.
ALTER TABLE ordertimeout.payments
    DROP CONSTRAINT payments_method_known,
    DROP COLUMN method;
