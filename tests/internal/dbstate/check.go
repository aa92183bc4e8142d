package dbstate

import (
	"fmt"
	"maps"
	"slices"
)

// Expect is what the caller knows and the database cannot: the points
// balances it put. (Stock totals and overdue orders are invariant.Options.)
type Expect struct {
	// Points maps every points account to the balance it was given with
	// put_points. If nil, balances are not checked.
	Points map[string]int64
}

// Paid reports whether status is one in which an order bought its items.
func Paid(status string) bool { return status == "PAID" || status == "REFUNDED" }

// Cancelled reports whether status is one in which an order released its
// reservations.
func Cancelled(status string) bool { return status == "CANCELLED" || status == "CLOSED" }

// Violations checks what invariant.Check (sidecar/invariant, one SQL
// snapshot) cannot, and returns one line per violation (none when all hold):
// the event log of every order (a legal path ending in its status, at most
// one cancel, no timeout before cancel_at, the cancel's cause in the order
// and in its releases, what a cancel released), the rows that name an order
// or payment that is not there, which payment status each conflict
// resolution leaves, the resolution and refund-claim events of each
// conflict, and each points account's balance against what was put. The
// invariants of docs/design.md themselves are invariant.Check's: a caller
// runs both, on the same state.
func (s *State) Violations(want Expect) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	events := s.EventsOf()
	reinstated := make(map[string]int) // conflicts resolved by reinstating, per order
	for _, c := range s.Conflicts {
		if c.Resolution != nil && *c.Resolution == "reinstated" {
			reinstated[c.OrderID]++
		}
	}

	// Every order's history is a legal path ending in its status, with at
	// most one cancel.
	cancelEvent := make(map[string]Event)
	for _, id := range slices.Sorted(maps.Keys(s.Orders)) {
		o := s.Orders[id]
		final, cancels, err := Replay(events[id])
		if err != nil {
			bad("order %s: event log: %v", id, err)
			continue
		}
		if final != o.Status {
			bad("order %s is %s but its events end in %s", id, o.Status, final)
		}
		switch {
		case len(cancels) > 1:
			bad("order %s was cancelled %d times (events %d and %d)", id, len(cancels), cancels[0].ID, cancels[1].ID)
		case len(cancels) == 1:
			c := cancels[0]
			cancelEvent[id] = c
			if Cancelled(o.Status) && (o.CancelCause == nil || *o.CancelCause != c.Cause) {
				bad("order %s has cancel_cause %v but was cancelled by a %s event", id, deref(o.CancelCause), c.Cause)
			}
			// A timeout never fires early (a cancelled order's deadline no
			// longer moves, so cancel_at is still the one it was due at).
			if (c.Cause == "timeout" || c.Cause == "sweep") && c.At.Before(o.CancelAt) {
				bad("order %s was cancelled by a %s at %v, before its cancel_at %v", id, c.Cause, c.At, o.CancelAt)
			}
		}
		if Cancelled(o.Status) && len(cancels) == 0 {
			bad("order %s is %s without a cancel event", id, o.Status)
		}
		if o.Status == "PAID" && len(cancels) == 1 && reinstated[id] != 1 {
			bad("order %s was cancelled and is PAID with %d reinstated conflicts, want 1", id, reinstated[id])
		}
	}
	for id := range events {
		if _, ok := s.Orders[id]; !ok {
			bad("events of order %s, which does not exist", id)
		}
	}

	// Rows about an order or a payment that is not there, and what each
	// conflict's resolution leaves its payment.
	conflictOf := make(map[string]Conflict)
	for _, c := range s.Conflicts {
		conflictOf[c.PaymentID] = c
	}
	for _, pid := range slices.Sorted(maps.Keys(s.Payments)) {
		p := s.Payments[pid]
		if _, ok := s.Orders[p.OrderID]; !ok {
			bad("payment %s of order %s, which does not exist", pid, p.OrderID)
		}
		c, has := conflictOf[pid]
		switch p.Status {
		case "late", "refunded":
		case "confirmed":
			if has && (c.Resolution == nil || *c.Resolution != "reinstated") {
				bad("payment %s is confirmed but its conflict %d is not reinstated", pid, c.ID)
			}
		default:
			if has {
				bad("payment %s is %s but has conflict %d", pid, p.Status, c.ID)
			}
		}
	}
	for _, c := range s.Conflicts {
		o, ok := s.Orders[c.OrderID]
		if !ok {
			bad("conflict %d of order %s, which does not exist", c.ID, c.OrderID)
			continue
		}
		p, ok := s.Payments[c.PaymentID]
		if !ok || p.OrderID != c.OrderID {
			bad("conflict %d names payment %s, which is not a payment of order %s", c.ID, c.PaymentID, c.OrderID)
			continue
		}
		switch c.Kind {
		case "late_payment", "double_payment":
		case "amount_mismatch":
			if deref(c.Resolution) == "reinstated" {
				bad("amount mismatch conflict %d on order %s was reinstated", c.ID, o.ID)
			}
		default:
			bad("conflict %d on order %s is of unknown kind %q", c.ID, o.ID, c.Kind)
		}
		want := map[string]string{"": "late", "reinstated": "confirmed", "refunded": "refunded", "manual": "late"}[deref(c.Resolution)]
		if p.Status != want {
			bad("conflict %d is resolved %q but its payment %s is %s, want %s", c.ID, deref(c.Resolution), p.ID, p.Status, want)
		}
	}

	// A resolved conflict's one resolution event names its resolution; a
	// conflict has a refund-claim event exactly when it was claimed for a
	// refund. (How many resolution events, and the states, are
	// invariant.ResolvedOnce.)
	resolutionEvents := make(map[int64][]Event)
	refundClaims := make(map[int64]int)
	for _, e := range s.Events {
		id, resolution, ok := ResolutionOf(e)
		switch {
		case !ok:
		case resolution == "refunding":
			refundClaims[id]++
		default:
			resolutionEvents[id] = append(resolutionEvents[id], e)
		}
	}
	for _, c := range s.Conflicts {
		if evs := resolutionEvents[c.ID]; c.Resolution != nil && len(evs) == 1 && evs[0].DetailString("resolution") != *c.Resolution {
			bad("conflict %d is resolved %s but event %d resolved it %s", c.ID, *c.Resolution, evs[0].ID, evs[0].DetailString("resolution"))
		}
		if n := refundClaims[c.ID]; (n >= 1) != c.RefundStarted {
			bad("conflict %d has %d refund claim events, claimed %v", c.ID, n, c.RefundStarted)
		}
	}

	// What the cancel event of an order released: every item, the coupon
	// and the points, with the cancel's cause; an order never cancelled
	// released nothing. (Reclaims and holds are invariant.ReleasedOnce.)
	released := make(map[string][]Release)
	for _, r := range s.Releases {
		released[r.OrderID] = append(released[r.OrderID], r)
	}
	for _, id := range slices.Sorted(maps.Keys(s.Orders)) {
		o := s.Orders[id]
		ce, wasCancelled := cancelEvent[id]
		wantRel := make(map[string]int64)
		if wasCancelled {
			for sku, qty := range o.Items {
				wantRel["stock/"+sku] = qty
			}
			if h, ok := s.CouponHolds[id]; ok {
				wantRel["coupon/"+h.Resource] = 1
			}
			if h, ok := s.PointsHolds[id]; ok {
				wantRel["points/"+h.Resource] = h.Qty
			}
		}
		gotRel := make(map[string]int64)
		for _, r := range released[id] {
			key := r.Kind + "/" + r.ResourceID
			if _, dup := gotRel[key]; dup {
				bad("order %s released %s twice", id, key)
			}
			gotRel[key] = r.Qty
			if wasCancelled && r.Cause != ce.Cause {
				bad("order %s was cancelled by %s but released %s with cause %s", id, ce.Cause, key, r.Cause)
			}
		}
		if !maps.Equal(wantRel, gotRel) {
			bad("order %s (%s) released %v, want %v", id, o.Status, gotRel, wantRel)
		}

	}
	for id := range released {
		if _, ok := s.Orders[id]; !ok {
			bad("releases of order %s, which does not exist", id)
		}
	}

	// Every points account's balance and what its paid orders spent add up
	// to what was put. (Held against the holds is invariant.Conserved.)
	if want.Points != nil {
		spent := make(map[string]int64)
		for _, h := range s.PointsHolds {
			if h.Used {
				spent[h.Resource] += h.Qty
			}
		}
		for _, id := range slices.Sorted(maps.Keys(s.Accounts)) {
			a := s.Accounts[id]
			if initial := want.Points[id]; a.Balance+spent[id] != initial {
				bad("points account %s: balance %d + spent %d = %d, want %d", id, a.Balance, spent[id], a.Balance+spent[id], initial)
			}
		}
	}
	return out
}

// Replay checks that events (one order's, oldest first) form a legal path of
// the state machine of docs/design.md and returns the status they end in and the
// events that cancelled the order.
func Replay(events []Event) (final string, cancels []Event, err error) {
	status := ""
	for i, e := range events {
		from := deref(e.From)
		if from != status {
			return "", nil, fmt.Errorf("event %d goes from %q but the order was %q", e.ID, from, status)
		}
		if i == 0 {
			if status != "" || e.To != "PENDING" || e.Cause != "requested" {
				return "", nil, fmt.Errorf("first event %d is %q -> %s (%s), want creation", e.ID, from, e.To, e.Cause)
			}
			status = e.To
			continue
		}
		if !legal(e) {
			return "", nil, fmt.Errorf("event %d: %s -> %s by %s is not a transition of the state machine", e.ID, from, e.To, e.Cause)
		}
		// A late payment takes a CLOSED order back to CANCELLED: not a cancel.
		if e.To == "CANCELLED" && from != "CANCELLED" && from != "CLOSED" {
			cancels = append(cancels, e)
		}
		status = e.To
	}
	if status == "" {
		return "", nil, fmt.Errorf("no creation event")
	}
	return status, cancels, nil
}

// legal reports whether e is a transition the API may write.
func legal(e Event) bool {
	from, to, cause := deref(e.From), e.To, e.Cause
	_, conflict := e.DetailInt("conflict_id")
	switch {
	case from == to && cause == "payment" && conflict:
		return true // late, double or mismatched payment
	case from == to && cause == "conflict":
		return conflict // a refund or a hand-off, any status
	}
	switch from + ">" + to {
	case "PENDING>PAYING", "PAYING>PAYING", "PAYING>PENDING", "PENDING>PAID", "PAYING>PAID":
		return cause == "payment" // PAYING>PENDING: failed, or paid the wrong amount
	case "PENDING>CANCELLED":
		return cause == "timeout" || cause == "sweep" || cause == "requested"
	case "PENDING>PENDING":
		return cause == "requested" // extend_deadline
	case "CANCELLED>CLOSED":
		return cause == "admin"
	case "CLOSED>CANCELLED":
		return cause == "payment" && conflict // a late payment reopens a closed order
	case "CANCELLED>PAID", "CLOSED>PAID":
		return cause == "conflict" && conflict // reinstated
	}
	return false
}

// ResolutionOf returns, for an event that resolves a conflict or claims it
// for a refund, the conflict's id and the resolution ("refunding" for the
// claim); ok is false for any other event.
func ResolutionOf(e Event) (conflictID int64, resolution string, ok bool) {
	id, has := e.DetailInt("conflict_id")
	resolution = e.DetailString("resolution")
	if !has || e.Cause != "conflict" || resolution == "" {
		return 0, "", false
	}
	return id, resolution, true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
