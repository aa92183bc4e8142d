// Package dbstate reads every row of ordertimeout's tables in one snapshot and
// checks in Go what the SQL probes of sidecar/invariant cannot see.
//
// The money-safety invariants of docs/design.md have one checker,
// invariant.Check; State.Violations adds what only a full read can check:
// that the event log of every order is a legal path of the state machine
// ending in the order's status, that an order was cancelled at most once and
// released with the cause of its cancel, that each conflict's events match
// its resolution, and that points balances add up to what was put. The model
// and restart tests run both on the same final state.
//
// Load reads the whole database, so it is for test databases of up to some
// hundred thousand orders.
package dbstate

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Order is one row of ordertimeout.orders with its items.
type Order struct {
	ID               string
	Status           string
	CreatedAt        time.Time
	ExpireAt         time.Time
	CancelAt         time.Time
	GatewayExpireAt  *time.Time // the expiry begin_payment gave the gateway
	PaidAt           *time.Time
	CancelledAt      *time.Time
	CancelCause      *string
	Version          int
	TimerJobID       *int64
	CheckJobID       *int64
	PaymentAttempted bool
	Amount           *string // numeric as text
	Currency         *string
	CouponID         *string
	PointsAccount    *string
	Points           *int64
	Items            map[string]int64 // qty per sku
}

// Event is one row of ordertimeout.events.
type Event struct {
	ID      int64
	OrderID string
	From    *string
	To      string
	Cause   string
	Actor   string
	At      time.Time
	Detail  map[string]any
}

// DetailString returns the text value of key in the event's detail, or "".
func (e Event) DetailString(key string) string {
	if s, ok := e.Detail[key].(string); ok {
		return s
	}
	return ""
}

// DetailInt returns the integer value of key in the event's detail and
// whether there is one.
func (e Event) DetailInt(key string) (int64, bool) {
	f, ok := e.Detail[key].(float64)
	return int64(f), ok
}

// Payment is one row of ordertimeout.payments.
type Payment struct {
	ID       string
	OrderID  string
	Status   string
	Amount   *string // numeric as text; nil when the confirmation gave none
	Currency *string // the order's when the confirmation gave none
}

// Conflict is one row of ordertimeout.conflicts.
type Conflict struct {
	ID         int64
	OrderID    string
	PaymentID  string
	Kind       string
	Amount     *string // numeric as text
	Currency   *string
	State      string // open, refunding or resolved
	Resolution *string
	// RefundStarted is set once resolve_conflict(id, 'refund') claimed the
	// conflict for a refund; RefundID is the gateway's refund, recorded by
	// finish_refund.
	RefundStarted bool
	RefundID      *string
}

// Release is one row of ordertimeout.releases.
type Release struct {
	OrderID    string
	Kind       string
	ResourceID string
	Qty        int64
	Cause      string
	Reclaimed  bool
}

// Stock is one row of ordertimeout.stock.
type Stock struct {
	Available int64
	Reserved  int64
	Sold      int64
}

// Hold is one row of ordertimeout.coupon_holds (Resource is the coupon, Qty
// 1) or ordertimeout.points_holds (Resource is the account, Qty the points).
type Hold struct {
	Resource string
	Qty      int64
	Used     bool
	Released bool
}

// Account is one row of ordertimeout.points_accounts.
type Account struct {
	Balance int64
	Held    int64
}

// Job is one row of public.river_job.
type Job struct {
	ID          int64
	Kind        string
	Queue       string
	State       string
	Args        map[string]any
	ScheduledAt time.Time
}

// State is every row of the ordertimeout tables (and River's job table) as one
// snapshot saw them.
type State struct {
	Now         time.Time // the snapshot's statement_timestamp()
	Orders      map[string]*Order
	Events      []Event // by event_id
	Payments    map[string]*Payment
	Conflicts   []Conflict // by conflict_id
	Releases    []Release
	Stock       map[string]Stock
	CouponHolds map[string]Hold // by order
	PointsHolds map[string]Hold // by order
	Accounts    map[string]Account
	Jobs        []Job // by id
}

// Beginner starts transactions: *pgxpool.Pool and *pgx.Conn are ones.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Load reads the state in one REPEATABLE READ, read-only transaction. The
// role of db must be able to read every ordertimeout table and river_job.
func Load(ctx context.Context, db Beginner) (*State, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("load state: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()

	s := &State{
		Orders:      make(map[string]*Order),
		Payments:    make(map[string]*Payment),
		Stock:       make(map[string]Stock),
		CouponHolds: make(map[string]Hold),
		PointsHolds: make(map[string]Hold),
		Accounts:    make(map[string]Account),
	}
	if err := tx.QueryRow(ctx, `SELECT statement_timestamp()`).Scan(&s.Now); err != nil {
		return nil, fmt.Errorf("load state: read clock: %w", err)
	}
	for _, step := range []struct {
		what string
		sql  string
		scan func(pgx.Rows) error
	}{
		{"orders", `
SELECT o.order_id, o.status, o.created_at, o.expire_at, o.cancel_at, o.paid_at, o.cancelled_at,
       o.cancel_cause, o.deadline_version, o.timer_job_id, o.check_job_id, o.payment_attempted,
       o.amount::text, o.currency, o.coupon_id, o.points_account, o.points, o.gateway_expire_at
FROM ordertimeout.orders AS o`, func(r pgx.Rows) error {
			o := &Order{Items: make(map[string]int64)}
			if err := r.Scan(&o.ID, &o.Status, &o.CreatedAt, &o.ExpireAt, &o.CancelAt, &o.PaidAt,
				&o.CancelledAt, &o.CancelCause, &o.Version, &o.TimerJobID, &o.CheckJobID,
				&o.PaymentAttempted, &o.Amount, &o.Currency, &o.CouponID, &o.PointsAccount, &o.Points,
				&o.GatewayExpireAt); err != nil {
				return err
			}
			s.Orders[o.ID] = o
			return nil
		}},
		{"order items", `SELECT i.order_id, i.sku, i.qty FROM ordertimeout.order_items AS i`, func(r pgx.Rows) error {
			var id, sku string
			var qty int64
			if err := r.Scan(&id, &sku, &qty); err != nil {
				return err
			}
			o, ok := s.Orders[id]
			if !ok {
				return fmt.Errorf("item %s of unknown order %q", sku, id)
			}
			o.Items[sku] = qty
			return nil
		}},
		{"events", `
SELECT e.event_id, e.order_id, e.from_status, e.to_status, e.cause, e.actor, e.at, e.detail
FROM ordertimeout.events AS e
ORDER BY e.event_id`, func(r pgx.Rows) error {
			var e Event
			if err := r.Scan(&e.ID, &e.OrderID, &e.From, &e.To, &e.Cause, &e.Actor, &e.At, &e.Detail); err != nil {
				return err
			}
			s.Events = append(s.Events, e)
			return nil
		}},
		{"payments", `SELECT p.payment_id, p.order_id, p.status, p.amount::text, p.currency FROM ordertimeout.payments AS p`, func(r pgx.Rows) error {
			p := &Payment{}
			if err := r.Scan(&p.ID, &p.OrderID, &p.Status, &p.Amount, &p.Currency); err != nil {
				return err
			}
			s.Payments[p.ID] = p
			return nil
		}},
		{"conflicts", `
SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount::text, c.currency, c.state, c.resolution,
       c.refund_started_at IS NOT NULL, c.refund_id
FROM ordertimeout.conflicts AS c
ORDER BY c.conflict_id`, func(r pgx.Rows) error {
			var c Conflict
			if err := r.Scan(&c.ID, &c.OrderID, &c.PaymentID, &c.Kind, &c.Amount, &c.Currency, &c.State, &c.Resolution,
				&c.RefundStarted, &c.RefundID); err != nil {
				return err
			}
			s.Conflicts = append(s.Conflicts, c)
			return nil
		}},
		{"releases", `
SELECT r.order_id, r.kind, r.resource_id, r.qty, r.cause, r.reclaimed_at IS NOT NULL
FROM ordertimeout.releases AS r
ORDER BY r.order_id, r.kind, r.resource_id`, func(r pgx.Rows) error {
			var rel Release
			if err := r.Scan(&rel.OrderID, &rel.Kind, &rel.ResourceID, &rel.Qty, &rel.Cause, &rel.Reclaimed); err != nil {
				return err
			}
			s.Releases = append(s.Releases, rel)
			return nil
		}},
		{"stock", `SELECT s.sku, s.available, s.reserved, s.sold FROM ordertimeout.stock AS s`, func(r pgx.Rows) error {
			var sku string
			var st Stock
			if err := r.Scan(&sku, &st.Available, &st.Reserved, &st.Sold); err != nil {
				return err
			}
			s.Stock[sku] = st
			return nil
		}},
		{"coupon holds", `
SELECT h.order_id, h.coupon_id, 1, h.used_at IS NOT NULL, h.released_at IS NOT NULL
FROM ordertimeout.coupon_holds AS h`, func(r pgx.Rows) error {
			var id string
			var h Hold
			if err := r.Scan(&id, &h.Resource, &h.Qty, &h.Used, &h.Released); err != nil {
				return err
			}
			s.CouponHolds[id] = h
			return nil
		}},
		{"points holds", `
SELECT h.order_id, h.account_id, h.points, h.used_at IS NOT NULL, h.released_at IS NOT NULL
FROM ordertimeout.points_holds AS h`, func(r pgx.Rows) error {
			var id string
			var h Hold
			if err := r.Scan(&id, &h.Resource, &h.Qty, &h.Used, &h.Released); err != nil {
				return err
			}
			s.PointsHolds[id] = h
			return nil
		}},
		{"points accounts", `SELECT a.account_id, a.balance, a.held FROM ordertimeout.points_accounts AS a`, func(r pgx.Rows) error {
			var id string
			var a Account
			if err := r.Scan(&id, &a.Balance, &a.Held); err != nil {
				return err
			}
			s.Accounts[id] = a
			return nil
		}},
		{"river jobs", `
SELECT j.id, j.kind, j.queue, j.state::text, j.args, j.scheduled_at
FROM public.river_job AS j
ORDER BY j.id`, func(r pgx.Rows) error {
			var j Job
			if err := r.Scan(&j.ID, &j.Kind, &j.Queue, &j.State, &j.Args, &j.ScheduledAt); err != nil {
				return err
			}
			s.Jobs = append(s.Jobs, j)
			return nil
		}},
	} {
		rows, err := tx.Query(ctx, step.sql)
		if err != nil {
			return nil, fmt.Errorf("load state: read %s: %w", step.what, err)
		}
		for rows.Next() {
			if err := step.scan(rows); err != nil {
				rows.Close()
				return nil, fmt.Errorf("load state: read %s: %w", step.what, err)
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load state: read %s: %w", step.what, err)
		}
	}
	return s, nil
}

// EventsOf returns the events of each order, oldest first.
func (s *State) EventsOf() map[string][]Event {
	by := make(map[string][]Event, len(s.Orders))
	for _, e := range s.Events {
		by[e.OrderID] = append(by[e.OrderID], e)
	}
	return by
}
