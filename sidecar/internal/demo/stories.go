package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
)

// Story ids: each is also the id of the order the story is about.
const (
	StoryAbandoned = "abandoned-cart"
	StorySilent    = "silent-payment"
	StoryDeclined  = "declined-card"
	StoryExtended  = "extended-deadline"
	StoryLate      = "late-payment"
	StoryLateSold  = "late-payment-sold-out"
	StoryQR        = "qr-no-callback"
)

// secondBuyer is the order that takes the last vinyl while the
// late-payment-sold-out order is cancelled.
const secondBuyer = "vinyl-second-buyer"

// story is one scripted order among the background traffic: something that
// can go wrong with a payment, played by the shop and then verified against
// the database.
type story struct {
	id     string
	what   string // what the buyer does
	play   func(ctx context.Context, s *shop) error
	verify func(ctx context.Context, db *pgxpool.Pool) (StoryResult, error)
}

// StoryResult is how a story ended, read from the database.
type StoryResult struct {
	ID      string // the story's id, also its order's id
	What    string // what the buyer did
	OK      bool   // the story ended as it must
	Outcome string // what happened, in a sentence
}

// paysSoon plays a buyer who orders one sku and pays a tenth of the timeout
// later, the gateway behaving as behaviour says.
func paysSoon(t timing, id, sku, behaviour string) func(ctx context.Context, s *shop) error {
	return func(ctx context.Context, s *shop) error {
		o, err := s.create(ctx, id, []item{{sku, 1}}, "", "", 0)
		if err != nil || !sleep(ctx, t.timeout/10) {
			return err
		}
		return s.pay(ctx, o, behaviour)
	}
}

// newStories returns the stories, in the order they start.
func newStories(t timing) []*story {
	return []*story{
		{
			id:   StoryAbandoned,
			what: "reserves 2 tee-black, 1 mug, coupon WELCOME10 and 150 of alice's points; never pays",
			play: func(ctx context.Context, s *shop) error {
				_, err := s.create(ctx, StoryAbandoned,
					[]item{{"tee-black", 2}, {"mug", 1}}, "WELCOME10", "alice", 150)
				return err
			},
			verify: verifyAbandoned,
		},
		{
			id:     StorySilent,
			what:   "pays; the gateway takes the money but never calls the shop back",
			play:   paysSoon(t, StorySilent, "poster", fakegateway.Silent),
			verify: verifySilent,
		},
		{
			id:     StoryDeclined,
			what:   "pays; the card is declined and the buyer gives up",
			play:   paysSoon(t, StoryDeclined, "tee-white", fakegateway.Decline),
			verify: verifyDeclined,
		},
		{
			id:   StoryExtended,
			what: "asks for more time before the deadline, then pays after the original deadline",
			play: func(ctx context.Context, s *shop) error {
				o, err := s.create(ctx, StoryExtended, []item{{"stickers", 3}}, "", "", 0)
				if err != nil || !sleep(ctx, time.Until(o.created.Add(t.timeout*3/4))) {
					return err
				}
				if _, err := s.db.Exec(ctx, "SELECT ordertimeout.extend_deadline($1, $2)", o.id, t.timeout/2); err != nil {
					return fmt.Errorf("extend deadline: %w", err)
				}
				if !sleep(ctx, time.Until(o.cancelAt.Add(t.timeout/10))) {
					return nil
				}
				return s.pay(ctx, o, fakegateway.Instant)
			},
			verify: verifyExtended,
		},
		{
			id:   StoryLate,
			what: "pays by bank transfer; the money lands after the order was cancelled",
			play: func(ctx context.Context, s *shop) error {
				o, err := s.create(ctx, StoryLate, []item{{"mug", 1}}, "", "", 0)
				if err != nil {
					return err
				}
				return s.payLate(ctx, o, o.cancelAt.Add(t.timeout/5))
			},
			verify: verifyLate,
		},
		{
			id:   StoryLateSold,
			what: "reserves the only vinyl-limited, pays by bank transfer after the cancel; meanwhile someone else bought the vinyl",
			play: func(ctx context.Context, s *shop) error {
				o, err := s.create(ctx, StoryLateSold, []item{{vinyl.sku, 1}}, "", "", 0)
				if err != nil {
					return err
				}
				if err := s.payLate(ctx, o, o.cancelAt.Add(t.timeout*3/10)); err != nil {
					return err
				}
				// The cancel puts the vinyl back on sale; the next buyer takes it.
				if err := s.waitStatus(ctx, o.id, "CANCELLED", o.cancelAt.Add(t.timeout/4)); err != nil {
					return err
				}
				second, err := s.create(ctx, secondBuyer, []item{{vinyl.sku, 1}}, "", "", 0)
				if err != nil {
					return err
				}
				return s.pay(ctx, second, fakegateway.Instant)
			},
			verify: verifyLateSoldOut,
		},
		{
			id:   StoryQR,
			what: "scans the QR code after the shop's window closed (the code is still valid at the gateway); the callback never comes",
			play: func(ctx context.Context, s *shop) error {
				o, err := s.create(ctx, StoryQR, []item{{"tee-white", 1}}, "", "", 0)
				if err != nil {
					return err
				}
				if err := s.waitStatus(ctx, o.id, "CANCELLED", o.cancelAt.Add(t.timeout/4)); err != nil {
					return err
				}
				// No begin_payment, no callback: only the gateway's records
				// know. The sidecar's reconciliation reads them.
				return s.gw.SetOrder(ctx, o.id, fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "wx-" + o.id, Amount: o.amount})
			},
			verify: verifyQR,
		},
	}
}

// event is one row of ordertimeout.order_events.
type event struct {
	from     string // empty for the first event
	to       string
	cause    string
	actor    string
	lateness *time.Duration
	at       time.Time
	detail   map[string]any
}

// loadEvents returns an order's history, oldest first.
func loadEvents(ctx context.Context, db *pgxpool.Pool, orderID string) ([]event, error) {
	rows, err := db.Query(ctx, `
SELECT coalesce(from_status, ''), to_status, cause, actor, lateness, at, coalesce(detail, '{}')::text
FROM ordertimeout.order_events($1)`, orderID)
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", orderID, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (event, error) {
		var e event
		var detail string
		if err := row.Scan(&e.from, &e.to, &e.cause, &e.actor, &e.lateness, &e.at, &detail); err != nil {
			return e, err
		}
		// Numbers stay as the database wrote them: an amount through
		// float64 loses its scale (9.00 → 9) and, past 2^53, its digits.
		dec := json.NewDecoder(strings.NewReader(detail))
		dec.UseNumber()
		return e, dec.Decode(&e.detail)
	})
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", orderID, err)
	}
	return events, nil
}

// find returns the first event matching ok.
func find(events []event, ok func(e event) bool) (event, bool) {
	for _, e := range events {
		if ok(e) {
			return e, true
		}
	}
	return event{}, false
}

// since formats when e happened relative to the order's first event.
func since(events []event, e event) string {
	if len(events) == 0 {
		return "?"
	}
	return fmt.Sprintf("+%.1f s", e.at.Sub(events[0].at).Seconds())
}

func isCancel(e event) bool { return e.to == "CANCELLED" && e.from != "CANCELLED" }
func isPaid(e event) bool   { return e.to == "PAID" }

// orderHistory returns the order's status, cancel cause and events.
func orderHistory(ctx context.Context, db *pgxpool.Pool, orderID string) (status, cause string, events []event, err error) {
	if status, cause, err = orderStatus(ctx, db, orderID); err != nil {
		return "", "", nil, err
	}
	events, err = loadEvents(ctx, db, orderID)
	return status, cause, events, err
}

// status returns an order's status and cancel cause.
func orderStatus(ctx context.Context, db *pgxpool.Pool, orderID string) (status, cause string, err error) {
	err = db.QueryRow(ctx,
		"SELECT status, coalesce(cancel_cause, '') FROM ordertimeout.order_info($1)", orderID).Scan(&status, &cause)
	if err != nil {
		return "", "", fmt.Errorf("read order %s: %w", orderID, err)
	}
	return status, cause, nil
}

// conflict is the resolution of an order's conflict ("" while open).
func conflictOf(ctx context.Context, db *pgxpool.Pool, orderID string) (kind, resolution string, found bool, err error) {
	err = db.QueryRow(ctx, `
SELECT kind, coalesce(resolution, 'open')
FROM ordertimeout.conflicts
WHERE order_id = $1
ORDER BY conflict_id
LIMIT 1`, orderID).Scan(&kind, &resolution)
	if err == pgx.ErrNoRows {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("read conflict of %s: %w", orderID, err)
	}
	return kind, resolution, true, nil
}

func verifyAbandoned(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	r := StoryResult{ID: StoryAbandoned}
	status, cause, events, err := orderHistory(ctx, db, r.ID)
	if err != nil {
		return r, err
	}
	cancel, cancelled := find(events, isCancel)
	if !cancelled || cause != "timeout" {
		r.Outcome = fmt.Sprintf("%s, not cancelled by its timeout", status)
		return r, nil
	}

	// What the cancel gave back, from the release ledger.
	rows, err := db.Query(ctx, `
SELECT CASE kind WHEN 'stock' THEN format('%s × %s', qty, resource_id)
                 WHEN 'coupon' THEN format('coupon %s', resource_id)
                 ELSE format('%s points to %s', qty, resource_id) END
FROM ordertimeout.releases
WHERE order_id = $1
  AND reclaimed_at IS NULL
ORDER BY CASE kind WHEN 'stock' THEN 1 WHEN 'coupon' THEN 2 ELSE 3 END, resource_id`, r.ID)
	if err != nil {
		return r, fmt.Errorf("read releases of %s: %w", r.ID, err)
	}
	released, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return r, fmt.Errorf("read releases of %s: %w", r.ID, err)
	}
	r.OK = len(released) == 4 // two SKUs, the coupon, the points
	r.Outcome = fmt.Sprintf("CANCELLED by timeout at %s, %s after its deadline; gave back %s",
		since(events, cancel), lateness(cancel.lateness), strings.Join(released, ", "))
	return r, nil
}

func verifySilent(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	r := StoryResult{ID: StorySilent}
	status, _, events, err := orderHistory(ctx, db, r.ID)
	if err != nil {
		return r, err
	}
	paid, isPaidNow := find(events, isPaid)
	_, cancelled := find(events, isCancel)
	if status != "PAID" || !isPaidNow || cancelled {
		r.Outcome = fmt.Sprintf("%s: the silent payment was not found", status)
		return r, nil
	}
	r.OK = true
	how := "after asking the gateway"
	if paid.cause == "reconcile" {
		how = "from the gateway's records (reconciliation)"
	}
	r.Outcome = fmt.Sprintf("PAID at %s, confirmed by %s %s; never cancelled",
		since(events, paid), paid.actor, how)
	return r, nil
}

// verifyQR checks the QR story: cancelled by its timeout, then the money
// found by reconciliation (a late-payment conflict with cause reconcile),
// resolved by the policy: reinstated, or refunded if the stock is gone.
func verifyQR(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	r := StoryResult{ID: StoryQR}
	status, _, events, err := orderHistory(ctx, db, r.ID)
	if err != nil {
		return r, err
	}
	var cause, kind, resolution string
	err = db.QueryRow(ctx, `
SELECT cause, kind, coalesce(resolution, 'open')
FROM ordertimeout.conflicts
WHERE order_id = $1
ORDER BY conflict_id
LIMIT 1`, r.ID).Scan(&cause, &kind, &resolution)
	if err == pgx.ErrNoRows {
		r.Outcome = fmt.Sprintf("%s: the money at the gateway was not found", status)
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read conflict of %s: %w", r.ID, err)
	}
	cancel, cancelled := find(events, isCancel)
	if !cancelled {
		r.Outcome = fmt.Sprintf("%s: never cancelled", status)
		return r, nil
	}
	found, _ := find(events, func(e event) bool { _, ok := e.detail["conflict_id"]; return ok })
	// Reinstated when the stock is still there, refunded when the
	// background shop sold it meanwhile: either is the policy's resolution.
	r.OK = cause == "reconcile" && kind == "late_payment" &&
		(resolution == "reinstated" && status == "PAID" || resolution == "refunded" && status == "CANCELLED")
	r.Outcome = fmt.Sprintf("CANCELLED by timeout at %s; reconciliation found the money at %s (conflict cause %s) → %s",
		since(events, cancel), since(events, found), cause, resolution)
	if resolved, ok := find(events, func(e event) bool { return e.cause == "conflict" }); ok {
		r.Outcome += fmt.Sprintf(" at %s by %s", since(events, resolved), resolved.actor)
	}
	r.Outcome += ": " + status
	return r, nil
}

func verifyDeclined(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	r := StoryResult{ID: StoryDeclined}
	status, cause, events, err := orderHistory(ctx, db, r.ID)
	if err != nil {
		return r, err
	}
	failed, wasFailed := find(events, func(e event) bool { return e.from == "PAYING" && e.to == "PENDING" })
	cancel, cancelled := find(events, isCancel)
	if !wasFailed || !cancelled || cause != "timeout" {
		r.Outcome = fmt.Sprintf("%s: not declined and then cancelled by its timeout", status)
		return r, nil
	}
	r.OK = true
	r.Outcome = fmt.Sprintf("declined at %s → PENDING again; CANCELLED by timeout at %s", since(events, failed), since(events, cancel))
	if reason, ok := cancel.detail["reason"].(string); ok {
		r.Outcome += " (" + reason + ")"
	}
	return r, nil
}

func verifyExtended(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	r := StoryResult{ID: StoryExtended}
	var status string
	var originalCancelAt time.Time
	var extendedBy float64
	err := db.QueryRow(ctx, `
SELECT o.status,
       o.cancel_at - make_interval(secs => sum((e.detail ->> 'extended_by_seconds')::float8)),
       sum((e.detail ->> 'extended_by_seconds')::float8)
FROM ordertimeout.orders AS o
JOIN ordertimeout.events AS e ON e.order_id = o.order_id AND e.detail ? 'extended_by_seconds'
WHERE o.order_id = $1
GROUP BY o.order_id`, r.ID).Scan(&status, &originalCancelAt, &extendedBy)
	if err == pgx.ErrNoRows {
		r.Outcome = "the deadline was never extended"
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read order %s: %w", r.ID, err)
	}
	events, err := loadEvents(ctx, db, r.ID)
	if err != nil {
		return r, err
	}
	paid, wasPaid := find(events, isPaid)
	if status != "PAID" || !wasPaid || !paid.at.After(originalCancelAt) {
		r.Outcome = fmt.Sprintf("%s: not paid after its original deadline", status)
		return r, nil
	}
	r.OK = true
	r.Outcome = fmt.Sprintf("deadline extended by %s s; PAID at %s, %.1f s after its original deadline",
		strconv.FormatFloat(extendedBy, 'f', -1, 64), since(events, paid), paid.at.Sub(originalCancelAt).Seconds())
	return r, nil
}

func verifyLate(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	return verifyLateStory(ctx, db, StoryLate, "PAID", "reinstated")
}

func verifyLateSoldOut(ctx context.Context, db *pgxpool.Pool) (StoryResult, error) {
	r, err := verifyLateStory(ctx, db, StoryLateSold, "CANCELLED", "refunded")
	if err != nil {
		return r, err
	}
	second, _, err := orderStatus(ctx, db, secondBuyer)
	if err != nil {
		return r, err
	}
	r.OK = r.OK && second == "PAID"
	r.Outcome += fmt.Sprintf("; the vinyl went to %s (%s)", secondBuyer, second)
	return r, nil
}

// verifyLateStory checks a late payment: cancelled by its timeout, then a
// late-payment conflict resolved as wantResolution, leaving the order in
// wantStatus.
func verifyLateStory(ctx context.Context, db *pgxpool.Pool, id, wantStatus, wantResolution string) (StoryResult, error) {
	r := StoryResult{ID: id}
	status, _, err := orderStatus(ctx, db, id)
	if err != nil {
		return r, err
	}
	kind, resolution, found, err := conflictOf(ctx, db, id)
	if err != nil {
		return r, err
	}
	events, err := loadEvents(ctx, db, id)
	if err != nil {
		return r, err
	}
	cancel, cancelled := find(events, isCancel)
	landed, _ := find(events, func(e event) bool { _, ok := e.detail["conflict_id"]; return ok && e.cause == "payment" })
	switch {
	case !cancelled:
		r.Outcome = fmt.Sprintf("%s: never cancelled, so the payment was not late", status)
		return r, nil
	case !found:
		r.Outcome = fmt.Sprintf("%s: no conflict recorded", status)
		return r, nil
	}
	r.OK = kind == "late_payment" && resolution == wantResolution && status == wantStatus
	r.Outcome = fmt.Sprintf("CANCELLED by timeout at %s; money landed at %s → %s conflict",
		since(events, cancel), since(events, landed), strings.ReplaceAll(kind, "_", " "))
	if resolved, ok := find(events, func(e event) bool { return e.cause == "conflict" }); ok {
		r.Outcome += fmt.Sprintf(" → %s at %s by %s", resolution, since(events, resolved), resolved.actor)
	} else {
		r.Outcome += " → still open"
	}
	r.Outcome += ": " + status
	return r, nil
}

// lateness formats how late something happened: milliseconds below a
// second, "?" when unknown.
func lateness(d *time.Duration) string {
	if d == nil {
		return "?"
	}
	return short(d.Seconds())
}

// short formats a number of seconds: "12 ms", "1.25 s".
func short(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}
