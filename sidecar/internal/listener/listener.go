package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"
	"github.com/riverqueue/river"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

// ConflictChannel is the channel confirm_payment notifies with a conflict id.
const ConflictChannel = "ordertimeout_conflict"

// Defaults of a Listener.
const (
	DefaultReconnectDelay = 2 * time.Second
	DefaultBacklog        = 10000
)

// Listener inserts a resolve job for every conflict it hears of. Create it
// with its fields set, then call Listen.
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

	// Rescan, if positive, also reads the backlog every Rescan on Pool,
	// in case a notification's job could not be inserted while the LISTEN
	// connection stayed up. It needs Pool.
	Rescan time.Duration

	// Pool reads the backlog for Rescan.
	Pool *pgxpool.Pool

	// Logger logs errors and backlogs. If nil, slog.Default() is used.
	Logger *slog.Logger

	notified, backlogged, connects atomic.Int64
}

// Stats are a Listener's counters.
type Stats struct {
	Notifications int64 // NOTIFYs handled
	Backlog       int64 // jobs inserted (or found present) from backlogs
	Connects      int64 // LISTENs established
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	return Stats{Notifications: l.notified.Load(), Backlog: l.backlogged.Load(), Connects: l.connects.Load()}
}

// Listen listens until ctx is done, reconnecting whenever the connection is
// lost, and returns nil then.
func (l *Listener) Listen(ctx context.Context) error {
	if l.Connect == nil || l.River == nil {
		return errors.New("listener: Connect and River are required")
	}
	delay := l.ReconnectDelay
	if delay <= 0 {
		delay = DefaultReconnectDelay
	}
	pl := &pgxlisten.Listener{
		Connect: l.Connect,
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				l.logger().Warn("listen for conflicts", "channel", ConflictChannel, "error", err)
			}
		},
		ReconnectDelay: delay,
	}
	// Every handler is registered before Listen.
	pl.Handle(ConflictChannel, handler{l})
	if l.Rescan > 0 && l.Pool != nil {
		go l.rescan(ctx)
	}
	err := pl.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listen for conflicts: %w", err)
}

type handler struct{ l *Listener }

// HandleNotification inserts the resolve job for the notified conflict.
func (h handler) HandleNotification(ctx context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	id, err := strconv.ParseInt(strings.TrimSpace(n.Payload), 10, 64)
	if err != nil {
		return fmt.Errorf("conflict notification payload %q is not a conflict id: %w", n.Payload, err)
	}
	h.l.notified.Add(1)
	if _, err := h.l.River.Insert(ctx, worker.ResolveConflictArgs{ConflictID: id}, nil); err != nil {
		return fmt.Errorf("insert resolve job for conflict %d: %w", id, err)
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

// rescan reads the backlog every Rescan until ctx is done.
func (l *Listener) rescan(ctx context.Context) {
	t := time.NewTicker(l.Rescan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := l.queue(ctx, l.Pool); err != nil && ctx.Err() == nil {
			l.logger().Warn("rescan open conflicts", "error", err)
		}
	}
}

// queue inserts a resolve job for each open conflict (up to Backlog) and
// returns how many it asked for.
func (l *Listener) queue(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) (int, error) {
	limit := l.Backlog
	if limit <= 0 {
		limit = DefaultBacklog
	}
	rows, err := db.Query(ctx, "SELECT conflict_id FROM ordertimeout.open_conflicts($1)", limit)
	if err != nil {
		return 0, fmt.Errorf("read open conflicts: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("read open conflicts: %w", err)
	}
	if len(ids) == 0 {
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
	return len(ids), nil
}

func (l *Listener) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
}
