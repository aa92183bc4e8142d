package status

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of WarnWhilePaused.
const (
	DefaultPauseCheck = 10 * time.Second
	PauseWarnEvery    = time.Minute
)

// WarnWhilePaused checks every check (if zero, DefaultPauseCheck) whether
// timeout cancels are paused and, while they are, logs a warning at most
// every PauseWarnEvery with who paused, since when, and how many orders
// wait. It returns when ctx ends.
func WarnWhilePaused(ctx context.Context, db Querier, check time.Duration, logger *slog.Logger) {
	if check <= 0 {
		check = DefaultPauseCheck
	}
	t := time.NewTicker(check)
	defer t.Stop()
	var warned time.Time // when the last warning was logged; zero while not paused
	for {
		var paused bool
		err := db.QueryRow(ctx, "SELECT paused FROM ordertimeout.settings").Scan(&paused)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				logger.Warn("read whether timeout cancels are paused", "error", err)
			}
		case !paused:
			warned = time.Time{}
		case warned.IsZero() || time.Since(warned) >= PauseWarnEvery:
			warned = time.Now()
			if err := warnPaused(ctx, db, logger); err != nil && ctx.Err() == nil {
				logger.Warn("timeout cancels are paused", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// warnPaused logs that timeout cancels are paused, by whom, since when, and
// how many orders wait.
func warnPaused(ctx context.Context, db Querier, logger *slog.Logger) error {
	var at *time.Time
	var by *string
	var secs *float64
	var waiting int64
	err := db.QueryRow(ctx, `
		SELECT s.paused_at, s.paused_by, extract(epoch FROM clock_timestamp() - s.paused_at)::float8,
		       st.due_timers + st.overdue_orders
		  FROM ordertimeout.settings AS s, ordertimeout.sweep_stats AS st`).Scan(&at, &by, &secs, &waiting)
	if err != nil {
		return fmt.Errorf("read pause: %w", err)
	}
	args := []any{"due_or_overdue", waiting}
	if at != nil && secs != nil {
		args = append(args, "paused_at", at.UTC(), "paused_for", time.Duration(*secs*float64(time.Second)).Round(time.Second))
	}
	if by != nil {
		args = append(args, "paused_by", *by)
	}
	logger.Warn("timeout cancels are paused: nothing is cancelled until 'ordertimeout resume'", args...)
	return nil
}
