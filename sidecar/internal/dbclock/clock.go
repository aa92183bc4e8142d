package dbclock

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs one query; *pgxpool.Pool and *pgx.Conn are Queriers.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// samples is how many round trips one measurement takes; the one with the
// shortest round trip is kept, as it bounds the error best.
const samples = 3

// DefaultInterval is how often Run measures again.
const DefaultInterval = 30 * time.Second

// WarnAbove is the offset above which Run logs a warning: the sidecar
// follows the database either way, but a host clock this far off is worth
// fixing.
const WarnAbove = time.Second

// Clock is the database's time as seen from this host. The zero value is a
// clock with no offset (the host's time) until Measure succeeds. It is safe
// for concurrent use.
type Clock struct {
	offset   atomic.Int64 // database minus host, nanoseconds
	err      atomic.Int64 // half the round trip of the kept sample, nanoseconds
	measured atomic.Bool
}

// Now returns the database's current time: the host's wall clock moved by
// the measured offset. The monotonic reading is kept.
func (c *Clock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// NowOrNil returns nil: River's queries then use the database's now().
func (c *Clock) NowOrNil() *time.Time { return nil }

// Offset returns how far the database's clock is ahead of this host's
// (negative: behind), as last measured, and whether it has been measured.
func (c *Clock) Offset() (offset time.Duration, measured bool) {
	return time.Duration(c.offset.Load()), c.measured.Load()
}

// Uncertainty returns half the round trip of the last measurement: the
// offset is right within it.
func (c *Clock) Uncertainty() time.Duration { return time.Duration(c.err.Load()) }

// Measure reads clock_timestamp() a few times and sets the offset from the
// reading with the shortest round trip, taking the database's reading to
// fall midway through it. It returns the new offset.
func (c *Clock) Measure(ctx context.Context, db Querier) (time.Duration, error) {
	best := time.Duration(-1)
	var offset time.Duration
	for range samples {
		var dbNow time.Time
		sent := time.Now()
		if err := db.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&dbNow); err != nil {
			return 0, fmt.Errorf("read the database's clock: %w", err)
		}
		rtt := time.Since(sent) // monotonic
		if best >= 0 && rtt >= best {
			continue
		}
		best = rtt
		// dbNow has no monotonic reading, so Sub compares wall clocks.
		offset = dbNow.Sub(sent.Add(rtt / 2))
	}
	c.offset.Store(int64(offset))
	c.err.Store(int64(best / 2))
	c.measured.Store(true)
	return offset, nil
}

// Run measures every interval (DefaultInterval if zero) until ctx is done;
// if the clock was measured already (before River started), the first
// measurement waits for the first interval. It logs the offset at its start,
// when it moves by more than a second, and warns while it is over WarnAbove.
// Failures are logged and retried at the next interval; the last offset
// stays in use.
func (c *Clock) Run(ctx context.Context, db Querier, interval time.Duration, logger *slog.Logger) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if logger == nil {
		logger = slog.Default()
	}
	var logged time.Duration
	hasLogged := false
	report := func(offset time.Duration) {
		if hasLogged && (offset-logged).Abs() <= time.Second {
			return
		}
		logged, hasLogged = offset, true
		level := slog.LevelInfo
		if offset.Abs() > WarnAbove {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, "the database's clock is the one followed; offset from this host's",
			"offset", offset.Round(time.Millisecond), "uncertainty", c.Uncertainty().Round(time.Microsecond))
	}
	measure := true
	if offset, measured := c.Offset(); measured {
		report(offset)
		measure = false
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if measure {
			offset, err := c.Measure(ctx, db)
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				logger.Warn("measure the database's clock", "error", err)
			default:
				report(offset)
			}
		}
		measure = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
