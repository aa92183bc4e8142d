package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// WakeChannel is the channel on which the database announces a deadline that
// comes before the moment the sweepers planned to wake up.
const WakeChannel = "ordertimeout_wake"

// Defaults of a Sweeper.
const (
	DefaultBatch    = 1000
	DefaultSessions = 2
	DefaultMaxSleep = time.Second

	// MaxBatch is the largest Batch: sweep_due refuses more (OT140).
	MaxBatch = 100000
	// MaxMaxSleep is the longest MaxSleep: plan_next_sweep refuses more (OT141).
	MaxMaxSleep = time.Hour
)

const (
	// minSleep is the shortest sleep after plan_next_sweep, which names a
	// moment already past when rows came due between the sweep and the
	// plan (rows the sweep passed over are planned for with a pause of
	// their own: heldRetryMax).
	// At a high rate of expiries a timeout is due every millisecond, so this
	// pause is part of every sweep cycle and of the cancel lag: 3 ms instead
	// of 10 took the steady benchmark's lag p50 from about 17 to 10 ms at
	// 1,000 orders/s, and its p99 from 15 to 6 ms at 200 orders/s.
	minSleep = 3 * time.Millisecond

	// deferPause is the first pause before sweeping again after a sweep
	// left orders to the next call because another transaction held a lock
	// their cancel needs. The holder is usually a create_order or a payment
	// about to commit (it locks stock last, so only for its commit), and each
	// such order otherwise waited a whole sweep cycle (plan_next_sweep, minSleep
	// and the next sweep: 13 ms more lag per deferral at 1,000 orders/s, the
	// steady benchmark with the deferred orders logged). The pause doubles
	// for each further sweep in a row that defers, up to deferRetries of
	// them; then plan_next_sweep plans the next sweep (heldRetryMax).
	deferPause = time.Millisecond

	// deferRetries bounds the quick sweeps in a row after deferrals.
	deferRetries = 2

	// heldRetryMax is the longest pause before due orders that a sweep
	// passed over are tried again: those it deferred (after the quick
	// sweeps), and those whose timer row another transaction holds (another
	// sweep, or one left open). After every sweep that is not a full batch,
	// plan_next_sweep is told that sweep's now() (held_due_by) and a pause
	// (retry_held_in): the timer rows due by then that are still there are
	// woken for again after no longer than the newest of them has been due,
	// nor than the current run of sweeps that passed rows over has lasted
	// (retryHeldIn), nor than this; every other order at its moment. So the
	// pauses double from a millisecond while a row stays held, and a row
	// held only briefly (just come due, or already late when its lock was
	// taken) is tried again within about as long as it was held, whatever
	// else has been held for long. Before, one due order held for minutes (a
	// payment's transaction left open) stayed the earliest due timer, and
	// the sweeper swept every few milliseconds for as long: 188 sweeps a
	// second, 0.39 cores with its server (tests/bench/held-order.sh; about
	// one sweep a second and 0.04 cores since). Now such an order costs
	// about log2(T/1 ms) sweeps plus one a second, and is cancelled at most
	// about T, and never more than heldRetryMax, after it is let go.
	heldRetryMax = time.Second

	// errorPause is how long the loop waits after a failed sweep.
	errorPause = time.Second

	// retries bounds the transparent retries of a sweep that failed with a
	// serialization failure or deadlock.
	retries = 5

	// statementTimeout bounds one sweep_due or plan_next_sweep call.
	statementTimeout = time.Minute
)

// Result is what one sweep_due call did.
type Result struct {
	Claimed       int // timer rows and lost timeouts claimed
	Cancelled     int // orders cancelled
	CaughtBySweep int // timeouts found without their timer row
	Checks        int // orders handed to a gateway check instead
	Moot          int // claimed rows that could no longer act
	Deferred      int // due orders left to the next call: a lock their cancel needs was held

	// SweptAt is the sweep transaction's now(): every order it passed over
	// (deferred, or whose timer row another transaction held) was due by
	// then (plan_next_sweep's held_due_by). Zero for a sweep that met the
	// start of a pause (OT137) and kept nothing.
	SweptAt time.Time
}

// Stats are a Sweeper's counters since it was created.
type Stats struct {
	Batches       int64 // sweep_due calls that returned
	Claimed       int64
	Cancelled     int64
	CaughtBySweep int64
	Checks        int64
	Moot          int64
	Deferred      int64 // due orders left to a later sweep because a lock was held
	QuickSweeps   int64 // sweeps made after a pause of deferPause (doubling) instead of the usual sleep
	HeldPlans     int64 // plans of the next sweep that found due orders passed over, held by another transaction
	Retries       int64 // sweeps repeated after a serialization failure or deadlock
	Errors        int64 // sweeps that failed
	Wakeups       int64 // NOTIFYs on WakeChannel received
}

// Sweeper calls ordertimeout.sweep_due until nothing is due, then sleeps until
// the next deadline or a wake-up. Create it with its fields set, register
// WakeHandler on the pgxlisten.Listener that should deliver its wake-ups
// (the sidecar's one LISTEN connection, package listener), then call Run.
type Sweeper struct {
	// Pool runs sweep_due and plan_next_sweep. It is required. Its connections
	// should set ordertimeout.actor so that events name this sidecar.
	Pool *pgxpool.Pool

	// Batch is the most orders one sweep_due call claims. If zero,
	// DefaultBatch is used.
	Batch int

	// Sessions is how many sessions sweep at once while full batches come
	// back. If zero, DefaultSessions is used.
	Sessions int

	// MaxSleep is the longest the sweeper sleeps between sweeps. It also
	// bounds how late a missed wake-up can make a cancel. If zero,
	// DefaultMaxSleep is used.
	MaxSleep time.Duration

	// Logger logs errors and drains. If nil, slog.Default() is used.
	Logger *slog.Logger

	batches, claimed, cancelled, caught, checks, moot atomic.Int64
	deferred, quick, held, retries, errors, wakeups   atomic.Int64
	// failingSweeps and failingPlans count the sweeps and the plans of the
	// next sweep that failed in a row (see Healthy).
	failingSweeps, failingPlans atomic.Int64

	// shrunk, when not zero, is a batch smaller than Batch that a sweep
	// ended by a statement timeout made the size of the sweeps since
	// shrunkAt (see size).
	mu       sync.Mutex
	shrunk   int
	shrunkAt time.Time

	wakeOnce sync.Once
	wake     chan struct{}

	heldRetryLimit time.Duration // tests only (SetHeldRetryMax); if zero, heldRetryMax is used
}

// Stats returns the sweeper's counters.
func (s *Sweeper) Stats() Stats {
	return Stats{
		Batches:       s.batches.Load(),
		Claimed:       s.claimed.Load(),
		Cancelled:     s.cancelled.Load(),
		CaughtBySweep: s.caught.Load(),
		Checks:        s.checks.Load(),
		Moot:          s.moot.Load(),
		Deferred:      s.deferred.Load(),
		QuickSweeps:   s.quick.Load(),
		HeldPlans:     s.held.Load(),
		Retries:       s.retries.Load(),
		Errors:        s.errors.Load(),
		Wakeups:       s.wakeups.Load(),
	}
}

// MaxFailing is how many sweeps, or plans of the next sweep, may fail in a
// row before Healthy reports the sweeper unhealthy.
const MaxFailing = 3

// Healthy reports nil unless the last MaxFailing sweeps, or the last
// MaxFailing plans of the next sweep, all failed: a database that refuses
// them (read-only after a failover, a schema rolled back, a statement
// timeout shorter than a batch) leaves due orders uncancelled, or cancelled
// up to MaxSleep late, however well the database answers a ping. The errors
// are in the log.
func (s *Sweeper) Healthy() error {
	if n := s.failingSweeps.Load(); n >= MaxFailing {
		return fmt.Errorf("the last %d sweeps failed (the sidecar's log has the errors)", n)
	}
	if n := s.failingPlans.Load(); n >= MaxFailing {
		return fmt.Errorf("the last %d plans of the next sweep failed (the sidecar's log has the errors)", n)
	}
	return nil
}

// Run sweeps until ctx is done, then returns nil once the sweeps in flight
// have committed or rolled back. It returns an error only for a
// misconfiguration.
func (s *Sweeper) Run(ctx context.Context) error {
	if s.Pool == nil {
		return errors.New("sweep: Pool is required")
	}
	logger := s.logger()
	logger.Info("sweeper started", "batch", s.batch(), "sessions", s.sessions(), "max_sleep", s.maxSleep())
	deferring := 0 // sweeps in a row that deferred orders
	// heldSince is the now() of the first sweep of the current run of
	// sweeps that passed due rows over (deferred them, or found them held):
	// the run ends with a plan that finds none.
	var heldSince time.Time
	for ctx.Err() == nil {
		// A wake-up that came before this sweep is answered by it.
		select {
		case <-s.wakeup():
		default:
		}

		res, err := s.Sweep(ctx)
		if err != nil {
			logger.Error("sweep due orders", "error", err)
			if ctx.Err() == nil {
				s.failingSweeps.Add(1)
			}
			s.pause(ctx, errorPause)
			continue
		}
		s.failingSweeps.Store(0)
		if res.Claimed >= s.size() && ctx.Err() == nil {
			s.drain(ctx)
			continue
		}
		if res.Deferred > 0 && heldSince.IsZero() {
			heldSince = res.SweptAt
		}
		if res.Deferred == 0 {
			deferring = 0
		} else if deferring++; deferring <= deferRetries {
			s.pause(ctx, deferPause<<(deferring-1))
			if ctx.Err() == nil {
				s.quick.Add(1)
			}
			continue
		}

		d, held, err := s.planSleep(ctx, res.SweptAt, s.retryHeldIn(heldSince, res.SweptAt))
		if err != nil && ctx.Err() != nil {
			break
		}
		if err != nil {
			logger.Error("plan next sweep", "error", err)
			s.failingPlans.Add(1)
			d = s.maxSleep()
		} else {
			s.failingPlans.Store(0)
		}
		if !held {
			heldSince = time.Time{}
		} else {
			s.held.Add(1)
			if heldSince.IsZero() {
				heldSince = res.SweptAt
			}
		}
		s.pause(ctx, d)
	}
	logger.Info("sweeper stopped")
	return nil
}

// drain runs Sessions sessions that each sweep until a batch comes back not
// full, or ctx is done.
func (s *Sweeper) drain(ctx context.Context) {
	start := time.Now()
	before := s.cancelled.Load()
	var wg sync.WaitGroup
	for range s.sessions() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				res, err := s.Sweep(ctx)
				if err != nil {
					s.logger().Error("sweep due orders", "error", err)
					return
				}
				if res.Claimed < s.size() {
					return
				}
			}
		}()
	}
	wg.Wait()
	s.logger().Info("drained due orders", "cancelled", s.cancelled.Load()-before, "elapsed", time.Since(start).Round(time.Millisecond))
}

// Sweep makes one sweep_due call, repeating it after a serialization failure
// or deadlock. A call that met the start of a pause (OT137) kept nothing and
// counts as one that claimed nothing. A call in flight when ctx ends still commits: stopping only
// stops new claims.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	var res Result
	for attempt := 1; ; attempt++ {
		size := s.size()
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout)
		err := s.Pool.QueryRow(qctx, sweepQuery, size).
			Scan(&res.Claimed, &res.Cancelled, &res.CaughtBySweep, &res.Checks, &res.Moot, &res.Deferred, &res.SweptAt)
		cancel()
		if err == nil {
			break
		}
		if retryable(err) && attempt < retries && ctx.Err() == nil {
			s.retries.Add(1)
			continue
		}
		if sqlstate.Is(err, sqlstate.Paused) {
			// A pause began while the call cancelled: it kept nothing, and
			// the next call finds the pause in the settings.
			s.logger().Info("a pause of timeout cancels began during a sweep: its batch was rolled back", "error", err)
			return Result{}, nil
		}
		s.errors.Add(1)
		if sqlstate.Is(err, queryCanceled) {
			s.shrink(size)
		}
		return Result{}, fmt.Errorf("sweep due orders: %w", err)
	}
	s.regrow()
	s.batches.Add(1)
	s.claimed.Add(int64(res.Claimed))
	s.cancelled.Add(int64(res.Cancelled))
	s.caught.Add(int64(res.CaughtBySweep))
	s.checks.Add(int64(res.Checks))
	s.moot.Add(int64(res.Moot))
	s.deferred.Add(int64(res.Deferred))
	if res.CaughtBySweep > 0 {
		s.logger().Warn("cancelled overdue orders that had lost their timer row", "caught_by_sweep", res.CaughtBySweep)
	}
	return res, nil
}

// retryHeldIn is the longest pause before due rows a sweep passed over are
// tried again (plan_next_sweep's retry_held_in; the pause is also no longer
// than the newest of them has been due): as long as the current run of
// sweeps that passed rows over has lasted, from heldSince to sweptAt, at
// least 1 ms and at most heldRetryMax (or a test's limit). So an order
// already late when another transaction took its lock is tried again after
// pauses that double from a millisecond, not after its lateness.
func (s *Sweeper) retryHeldIn(heldSince, sweptAt time.Time) time.Duration {
	limit := heldRetryMax
	if s.heldRetryLimit > 0 {
		limit = s.heldRetryLimit
	}
	if heldSince.IsZero() {
		return time.Millisecond
	}
	return min(max(sweptAt.Sub(heldSince), time.Millisecond), limit)
}

// planSleep records when this sweeper will sweep next and returns how long
// to sleep, and whether due rows that the last sweep passed over (due by
// sweptAt, its now(); zero for none known) are still there: they are tried
// again after a pause as long as the newest of them has been due, at most
// retryHeld. Both moments are the database's clock.
func (s *Sweeper) planSleep(ctx context.Context, sweptAt time.Time, retryHeld time.Duration) (time.Duration, bool, error) {
	qctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	var dueBy *time.Time
	var retryIn *int64
	if !sweptAt.IsZero() {
		dueBy, retryIn = &sweptAt, ptr(retryHeld.Microseconds())
	}
	var wakeAt, now time.Time
	var held bool
	err := s.Pool.QueryRow(qctx, `
		SELECT p.wake_at, p.held, clock_timestamp()
		FROM ordertimeout.plan_next_sweep($1 * interval '1 microsecond', $2, $3 * interval '1 microsecond') AS p`,
		s.maxSleep().Microseconds(), dueBy, retryIn).Scan(&wakeAt, &held, &now)
	if sqlstate.Is(err, sqlstate.HeldDueByAhead) && dueBy != nil {
		// The database's clock went back since the sweep (OT156): plan
		// as if it had passed nothing over.
		s.logger().Warn("the database's clock went back between a sweep and the plan of the next one", "error", err)
		return s.planSleep(ctx, time.Time{}, retryHeld)
	}
	if err != nil {
		return 0, false, fmt.Errorf("plan next sweep: %w", err)
	}
	return min(max(wakeAt.Sub(now), minSleep), s.maxSleep()), held, nil
}

// pause waits for d, a wake-up or the end of ctx.
func (s *Sweeper) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.wakeup():
	case <-ctx.Done():
	}
}

// WakeHandler returns the handler of NOTIFYs on WakeChannel: each wakes the
// sweep loop, as does each (re)connect of the listener (a wake-up may have
// been sent while nobody listened). Without it, the sweeper still sweeps at
// least every MaxSleep.
func (s *Sweeper) WakeHandler() pgxlisten.Handler { return wakeHandler{s} }

type wakeHandler struct{ s *Sweeper }

// HandleNotification wakes the sweep loop.
func (h wakeHandler) HandleNotification(context.Context, *pgconn.Notification, *pgx.Conn) error {
	h.s.wakeups.Add(1)
	h.s.signal()
	return nil
}

// HandleBacklog runs after each (re)connect: a wake-up may have been sent
// while nobody listened, so it wakes the sweep loop.
func (h wakeHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.s.signal()
	return nil
}

func (s *Sweeper) signal() {
	select {
	case s.wakeup() <- struct{}{}:
	default:
	}
}

// wakeup returns the channel of wake-ups; capacity 1, so a burst of them
// makes one sweep.
func (s *Sweeper) wakeup() chan struct{} {
	s.wakeOnce.Do(func() { s.wake = make(chan struct{}, 1) })
	return s.wake
}

func ptr[T any](v T) *T { return &v }

func retryable(err error) bool {
	return sqlstate.Is(err, sqlstate.SerializationFailure, sqlstate.DeadlockDetected)
}

// queryCanceled is PostgreSQL's code of a statement ended by
// statement_timeout, by a cancel request, or by the sweep's own timeout.
const queryCanceled = "57014"

// BoundLockWaits is an AfterConnect of the pool a Sweeper sweeps with: when
// the session has a statement_timeout (its role's, say) and no lock_timeout
// below half of it, it sets lock_timeout to half of it. A sweep that waits
// for a lock another transaction holds then fails with 55P03, not 57014, and
// the sweeper shrinks its batch only for sweeps that a statement timeout
// ended while working (a batch too large for the timeout), never for a lock
// wait, which a smaller batch would not shorten.
func BoundLockWaits(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `
		SELECT set_config('lock_timeout',
		                  (extract(epoch FROM current_setting('statement_timeout')::interval) * 500)::bigint || 'ms', false)
		 WHERE current_setting('statement_timeout')::interval > interval '0'
		   AND (current_setting('lock_timeout')::interval = interval '0'
		        OR current_setting('lock_timeout')::interval > current_setting('statement_timeout')::interval / 2)`)
	if err != nil {
		return fmt.Errorf("bound lock waits to half the statement timeout: %w", err)
	}
	return nil
}

// regrowAfter is how long the sweeps stay at a batch that a statement
// timeout shrank before they double it again, towards Batch.
const regrowAfter = time.Minute

// size is the batch of the next sweep: Batch, or less while a statement
// timeout has made it smaller (shrink).
func (s *Sweeper) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shrunk > 0 {
		return s.shrunk
	}
	return s.batch()
}

// shrink halves the batch after a sweep of size orders was ended by a
// statement timeout (statement_timeout of the sidecar's role, say, shorter
// than a sweep of Batch orders takes): each ended sweep rolls back and
// cancels nothing, so sweeping the same size again would stall every due
// order. It stops at 1, and regrow brings it back. With BoundLockWaits on
// the pool, a sweep waiting for a lock fails otherwise (55P03) and does not
// shrink the batch.
func (s *Sweeper) shrink(size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if size <= 1 || (s.shrunk > 0 && s.shrunk < size) {
		return
	}
	s.shrunk, s.shrunkAt = size/2, time.Now()
	s.logger().Warn("a sweep was ended by a statement timeout and cancelled nothing: sweeping fewer orders at a time"+
		" (check statement_timeout of the sidecar's role)", "batch", size, "next_batch", s.shrunk, "sweep_batch", s.batch())
}

// regrow doubles a batch that a statement timeout shrank, towards Batch,
// once it has served regrowAfter without one.
func (s *Sweeper) regrow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shrunk == 0 || time.Since(s.shrunkAt) < regrowAfter {
		return
	}
	s.shrunk, s.shrunkAt = min(2*s.shrunk, s.batch()), time.Now()
	if s.shrunk == s.batch() {
		s.shrunk = 0
	}
}

func (s *Sweeper) batch() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return DefaultBatch
}

func (s *Sweeper) sessions() int {
	if s.Sessions > 0 {
		return s.Sessions
	}
	return DefaultSessions
}

func (s *Sweeper) maxSleep() time.Duration {
	if s.MaxSleep > 0 {
		return s.MaxSleep
	}
	return DefaultMaxSleep
}

func (s *Sweeper) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
