-- When and why the sidecar handed an open conflict to a person
-- (hand_over_conflict); conflicts_to_resolve leaves those out.
ALTER TABLE ordertimeout.conflicts
    ADD COLUMN handed_over_at  timestamptz,
    ADD COLUMN handed_over_why text,
    ADD CONSTRAINT conflicts_handed_over_together CHECK ((handed_over_at IS NULL) = (handed_over_why IS NULL)),
    ADD CONSTRAINT conflicts_handed_over_why_length CHECK (char_length(handed_over_why) BETWEEN 1 AND 500);
COMMENT ON COLUMN ordertimeout.conflicts.handed_over_at IS
    'when the sidecar handed the open conflict to a person (hand_over_conflict): from then on it no longer acts on it (conflicts_to_resolve leaves it out) until a person resolves it or claims its refund';
COMMENT ON COLUMN ordertimeout.conflicts.handed_over_why IS
    'why the sidecar handed the conflict to a person (the gateway''s answer that it could not act on)';
