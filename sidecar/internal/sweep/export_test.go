package sweep

import (
	"context"
	"time"
)

// SetHeldRetryMax sets the longest pause before s tries a held order again
// (heldRetryMax otherwise), so that a test can tell a sweeper that wakes
// for other orders on time from one that waits for the held orders' pause.
func SetHeldRetryMax(s *Sweeper, d time.Duration) { s.heldRetryLimit = d }

// PlanSleep is planSleep: how long s sleeps after a sweep whose now() was
// sweptAt, and whether due rows it passed over are still there.
func PlanSleep(ctx context.Context, s *Sweeper, sweptAt time.Time, retryHeld time.Duration) (time.Duration, bool, error) {
	return s.planSleep(ctx, sweptAt, retryHeld)
}

// Size is size: the batch of s's next sweep.
func Size(s *Sweeper) int { return s.size() }
