-- The functions and the view of 000057 no longer read them. A conflict
-- handed to a person is open again for the sidecar of 000057, which asks
-- the gateway about it at every rescan, and, under the refund policy or for
-- a double payment or a mismatch, claims its refund of the amount recorded
-- here without asking: for a conflict handed over because the gateway's
-- record contradicts that amount (other_amount, partly_held), a refund of
-- part of the payment, or one refused for ever. Settle those (resolve them)
-- before going down.
ALTER TABLE ordertimeout.conflicts
    DROP CONSTRAINT conflicts_handed_over_why_length,
    DROP CONSTRAINT conflicts_handed_over_together,
    DROP COLUMN handed_over_why,
    DROP COLUMN handed_over_at;
