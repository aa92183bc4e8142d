-- The functions and the view of 000057 no longer read them. A conflict
-- handed to a person is open again for the sidecar of 000057, which asks
-- the gateway about it at every rescan.
ALTER TABLE ordertimeout.conflicts
    DROP CONSTRAINT conflicts_handed_over_why_length,
    DROP CONSTRAINT conflicts_handed_over_together,
    DROP COLUMN handed_over_why,
    DROP COLUMN handed_over_at;
