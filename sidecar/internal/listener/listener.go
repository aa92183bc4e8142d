package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"
	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

// ConflictChannel is the channel confirm_payment and resolve_conflict notify
// when a conflict needs the sidecar. The payload is ignored.
const ConflictChannel = "ordertimeout_conflict"

// Defaults of a Listener.
const (
	DefaultReconnectDelay = 2 * time.Second
	DefaultBacklog        = 10000
)

// Listener holds the sidecar's one LISTEN connection. On ConflictChannel it
// inserts a resolve job for every conflict that needs the sidecar, each time
// it is woken up; the handlers given to Handle serve more channels on the
// same connection (the sweep's wake-ups). Create it with its fields set, add
// handlers, then call Listen.
type Listener struct {
	// Connect opens the connection that LISTENs. The Listener closes it.
	// It is required.
	Connect func(ctx context.Context) (*pgx.Conn, error)

	// River inserts the resolve jobs. It is required.
	River *river.Client[pgx.Tx]

	// ReconnectDelay is how long to wait before connecting again after the
	// connection was lost. If zero, DefaultReconnectDelay is used.
	ReconnectDelay time.Duration

	// Backlog is the most open conflicts read after each (re)connect. If
	// zero, DefaultBacklog is used.
	Backlog int

	// Rescan, if positive, also reads the backlog every Rescan, in case a
	// wake-up's jobs could not be inserted while the LISTEN connection stayed
	// up.
	Rescan time.Duration

	// Pool reads the backlog after wake-ups and for Rescan. It is required.
	Pool *pgxpool.Pool

	// Logger logs errors and backlogs. If nil, slog.Default() is used.
	Logger *slog.Logger

	handlers map[string]pgxlisten.Handler

	notified, backlogged, connects, scans atomic.Int64

	// wake asks the scanning goroutine for a scan; capacity 1, so a burst
	// of notifications makes one scan.
	wake chan struct{}
}

// Handle sets the handler of the notifications on channel, which is not
// ConflictChannel. Call it before Listen. The handler runs on the listening
// connection, one notification at a time, so it must return at once; if it
// is also a pgxlisten.BacklogHandler, it runs after each LISTEN on channel,
// also after a reconnect.
func (l *Listener) Handle(channel string, h pgxlisten.Handler) {
	if l.handlers == nil {
		l.handlers = map[string]pgxlisten.Handler{}
	}
	l.handlers[channel] = h
}

// Stats are a Listener's counters.
type Stats struct {
	Notifications int64 // NOTIFYs received (wake-ups, coalesced into scans)
	Backlog       int64 // jobs inserted (or found present) by scans
	Connects      int64 // connections established (each LISTENs on every channel)
	Scans         int64 // scans of the conflicts table that succeeded
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	return Stats{Notifications: l.notified.Load(), Backlog: l.backlogged.Load(), Connects: l.connects.Load(),
		Scans: l.scans.Load()}
}

// Listen listens on ConflictChannel and the channels of Handle until ctx is
// done, on one connection, reconnecting whenever the connection is lost, and
// returns nil then.
func (l *Listener) Listen(ctx context.Context) error {
	if l.Connect == nil || l.River == nil || l.Pool == nil {
		return errors.New("listener: Connect, River and Pool are required")
	}
	if _, ok := l.handlers[ConflictChannel]; ok {
		return fmt.Errorf("listener: channel %s is the listener's own", ConflictChannel)
	}
	l.wake = make(chan struct{}, 1)
	delay := l.ReconnectDelay
	if delay <= 0 {
		delay = DefaultReconnectDelay
	}
	pl := &pgxlisten.Listener{
		Connect: l.Connect,
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				l.logger().Warn("listen for notifications", "error", err)
			}
		},
		ReconnectDelay: delay,
	}
	// Every handler is registered before Listen.
	pl.Handle(ConflictChannel, handler{l})
	for channel, h := range l.handlers {
		pl.Handle(channel, h)
	}
	go l.scanLoop(ctx)
	err := pl.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listen for notifications: %w", err)
}

type handler struct{ l *Listener }

// HandleNotification asks for a scan. The payload is not read: a
// notification is only a wake-up, whoever sent it.
func (h handler) HandleNotification(_ context.Context, _ *pgconn.Notification, _ *pgx.Conn) error {
	h.l.notified.Add(1)
	select {
	case h.l.wake <- struct{}{}:
	default: // a scan is asked for already
	}
	return nil
}

// HandleBacklog inserts a resolve job for every open conflict. It runs right
// after LISTEN, so a conflict committed meanwhile is seen here or notified.
func (h handler) HandleBacklog(ctx context.Context, _ string, conn *pgx.Conn) error {
	h.l.connects.Add(1)
	n, err := h.l.queue(ctx, conn)
	if err != nil {
		return err
	}
	if n > 0 {
		h.l.logger().Info("queued open conflicts found after connecting", "conflicts", n)
	}
	return nil
}

// scanLoop scans after each wake-up, and every Rescan if set, until ctx is
// done.
func (l *Listener) scanLoop(ctx context.Context) {
	var tick <-chan time.Time
	if l.Rescan > 0 {
		t := time.NewTicker(l.Rescan)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-tick:
		}
		if _, err := l.queue(ctx, l.Pool); err != nil && ctx.Err() == nil {
			l.logger().Warn("scan conflicts after a wake-up", "error", err)
		}
	}
}

// queue inserts a resolve job for each conflict that needs the sidecar (up to
// Backlog, oldest first) and returns how many it asked for: every conflict
// claimed for a refund, and the open ones unless their policy leaves them to
// a person (late_payment manual, the payment method's or the settings'), or
// that the sidecar handed to a person (hand_over_conflict), which would only
// make jobs that do nothing. conflicts_to_resolve applies
// the limit to these alone, so conflicts left to a person never hide them.
func (l *Listener) queue(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) (int, error) {
	limit := l.Backlog
	if limit <= 0 {
		limit = DefaultBacklog
	}
	rows, err := db.Query(ctx, `
		SELECT c.conflict_id
		  FROM ordertimeout.conflicts_to_resolve($1) AS c`, limit)
	if err != nil {
		return 0, fmt.Errorf("read open conflicts: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("read open conflicts: %w", err)
	}
	if len(ids) == 0 {
		l.scans.Add(1)
		return 0, nil
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: worker.ResolveConflictArgs{ConflictID: id}}
	}
	if _, err := l.River.InsertMany(ctx, params); err != nil {
		return 0, fmt.Errorf("insert resolve jobs for %d open conflicts: %w", len(ids), err)
	}
	l.backlogged.Add(int64(len(ids)))
	l.scans.Add(1)
	return len(ids), nil
}

func (l *Listener) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
}
