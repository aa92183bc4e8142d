package sweep

import "time"

// SetHeldRetryMax sets the longest pause before s tries a held order again
// (heldRetryMax otherwise), so that a test can tell a sweeper that wakes
// for other orders on time from one that waits for its held orders' pause.
func SetHeldRetryMax(s *Sweeper, d time.Duration) { s.heldRetryLimit = d }
