-- The functions and the view of 000058 no longer read them: the close at
-- the cancel and the late-payment policy go by the order's last payment
-- method again. Nothing is lost for good: begin_payment logs each
-- attempt's method in its PAYING event, from which 000059 fills them again.
ALTER TABLE ordertimeout.payments
    DROP CONSTRAINT payments_method_known,
    DROP COLUMN method_recorded,
    DROP COLUMN method;
