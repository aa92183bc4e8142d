package dbstate

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"time"
)

// Expect is what the caller knows and the database cannot: the totals it
// put, and how overdue a PENDING order may be.
type Expect struct {
	// Stock maps every SKU to its units in all (available + reserved +
	// sold): what was put with put_stock. If nil, totals are not checked.
	Stock map[string]int64
	// Points maps every points account to the balance it was given with
	// put_points. If nil, balances are not checked (held still is).
	Points map[string]int64
	// Overdue is how far past its cancel_at a PENDING order may be. If zero,
	// overdue orders are not looked for.
	Overdue time.Duration
}

// Live reports whether status is one in which an order holds its
// reservations.
func Live(status string) bool { return status == "PENDING" || status == "PAYING" }

// Paid reports whether status is one in which an order bought its items.
func Paid(status string) bool { return status == "PAID" || status == "REFUNDED" }

// Cancelled reports whether status is one in which an order released its
// reservations.
func Cancelled(status string) bool { return status == "CANCELLED" || status == "CLOSED" }

// Violations checks the money-safety invariants of docs/design.md, and the event
// log of every order, and returns one line per violation (none when all
// hold).
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

	// 1. No order both paid and cancelled; late money is a conflict row.
	confirmed := make(map[string]int)
	for _, p := range s.Payments {
		if p.Status == "confirmed" {
			confirmed[p.OrderID]++
		}
	}
	conflictOf := make(map[string]Conflict)
	for _, c := range s.Conflicts {
		conflictOf[c.PaymentID] = c
	}
	for _, id := range slices.Sorted(maps.Keys(s.Orders)) {
		o := s.Orders[id]
		if o.PaidAt != nil && o.CancelledAt != nil {
			bad("order %s is paid and cancelled", id)
		}
		if Paid(o.Status) != (o.PaidAt != nil) || Cancelled(o.Status) != (o.CancelledAt != nil) {
			bad("order %s is %s with paid_at %v and cancelled_at %v", id, o.Status, o.PaidAt, o.CancelledAt)
		}
		switch {
		case o.Status == "PAID" && confirmed[id] != 1:
			bad("order %s is PAID with %d confirmed payments, want 1", id, confirmed[id])
		case !Paid(o.Status) && confirmed[id] != 0:
			bad("order %s is %s with %d confirmed payments", id, o.Status, confirmed[id])
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(s.Payments)) {
		p := s.Payments[pid]
		if _, ok := s.Orders[p.OrderID]; !ok {
			bad("payment %s of order %s, which does not exist", pid, p.OrderID)
		}
		c, has := conflictOf[pid]
		switch p.Status {
		case "late", "refunded":
			if !has {
				bad("payment %s of order %s is %s without a conflict row", pid, p.OrderID, p.Status)
			}
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
		case "late_payment":
			if !Cancelled(o.Status) && !(o.Status == "PAID" && reinstated[o.ID] == 1) {
				bad("late payment conflict %d on order %s, which is %s", c.ID, o.ID, o.Status)
			}
		case "double_payment":
			if !Paid(o.Status) {
				bad("double payment conflict %d on order %s, which is %s", c.ID, o.ID, o.Status)
			}
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

	// 6. Money is exact: a PAID order's payment is of the order's amount
	// and currency (or, given without an amount, recorded as unverified);
	// no amount anywhere is NaN, infinite, negative or 10^15 or more.
	unverified := make(map[string]bool) // payments that paid without an amount
	for _, e := range s.Events {
		if e.To == "PAID" && e.Cause == "payment" && e.Detail["unverified"] == true {
			unverified[e.DetailString("payment_id")] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Orders)) {
		o := s.Orders[id]
		if o.Amount != nil && !ValidAmount(*o.Amount) {
			bad("order %s has amount %s", id, *o.Amount)
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(s.Payments)) {
		p := s.Payments[pid]
		o := s.Orders[p.OrderID]
		if p.Amount != nil && !ValidAmount(*p.Amount) {
			bad("payment %s of order %s has amount %s", pid, p.OrderID, *p.Amount)
		}
		if o == nil || p.Status != "confirmed" || !Paid(o.Status) {
			continue
		}
		switch {
		case o.Amount != nil && p.Amount == nil && !unverified[pid]:
			bad("order %s of %s is paid by payment %s without an amount, not recorded as unverified", o.ID, *o.Amount, pid)
		case o.Amount != nil && p.Amount != nil && !SameAmount(*o.Amount, *p.Amount):
			bad("order %s of %s is paid by payment %s of %s", o.ID, *o.Amount, pid, *p.Amount)
		}
		if o.Currency != nil && deref(p.Currency) != *o.Currency {
			bad("order %s in %s is paid by payment %s in %q", o.ID, *o.Currency, pid, deref(p.Currency))
		}
	}

	// 7. Every conflict ends in at most one resolution, a resolved one in
	// exactly one (one event), and a refund that started is the one that
	// finishes: a payment refunded never pays its order.
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
		if c.Amount != nil && !ValidAmount(*c.Amount) {
			bad("conflict %d has amount %s", c.ID, *c.Amount)
		}
		resolved := c.Resolution != nil
		switch {
		case !slices.Contains([]string{"open", "refunding", "resolved"}, c.State):
			bad("conflict %d is in unknown state %q", c.ID, c.State)
		case (c.State == "resolved") != resolved:
			bad("conflict %d is %s with resolution %q", c.ID, c.State, deref(c.Resolution))
		case c.RefundStarted && c.State != "refunding" && deref(c.Resolution) != "refunded":
			bad("conflict %d was claimed for a refund but ended %s %q", c.ID, c.State, deref(c.Resolution))
		case c.State == "refunding" && !c.RefundStarted:
			bad("conflict %d is refunding without a claim", c.ID)
		}
		evs := resolutionEvents[c.ID]
		switch {
		case len(evs) > 1:
			bad("conflict %d has %d resolution events (%s in event %d, %s in event %d)", c.ID, len(evs),
				evs[0].DetailString("resolution"), evs[0].ID, evs[1].DetailString("resolution"), evs[1].ID)
		case resolved && len(evs) == 0:
			bad("conflict %d is resolved %s without a resolution event", c.ID, *c.Resolution)
		case !resolved && len(evs) == 1:
			bad("conflict %d is %s but event %d resolved it %s", c.ID, c.State, evs[0].ID, evs[0].DetailString("resolution"))
		case resolved && evs[0].DetailString("resolution") != *c.Resolution:
			bad("conflict %d is resolved %s but event %d resolved it %s", c.ID, *c.Resolution, evs[0].ID, evs[0].DetailString("resolution"))
		}
		if n := refundClaims[c.ID]; n > 1 || (n == 1) != c.RefundStarted {
			bad("conflict %d has %d refund claim events, claimed %v", c.ID, n, c.RefundStarted)
		}
		if p := s.Payments[c.PaymentID]; p != nil && p.Status == "confirmed" && (c.RefundStarted || c.RefundID != nil) {
			bad("payment %s pays order %s, but conflict %d refunds it", p.ID, p.OrderID, c.ID)
		}
	}

	// 8. No CLOSED order has an unresolved conflict.
	for _, c := range s.Conflicts {
		if o := s.Orders[c.OrderID]; o != nil && o.Status == "CLOSED" && c.Resolution == nil {
			bad("order %s is CLOSED with conflict %d %s", o.ID, c.ID, c.State)
		}
	}

	// 2. Every cancelled order released what it reserved, once; a reinstated
	// one took all of it back; no other order released anything.
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
			if r.Reclaimed != (o.Status == "PAID") {
				bad("order %s is %s and its release of %s has reclaimed = %v", id, o.Status, key, r.Reclaimed)
			}
			if wasCancelled && r.Cause != ce.Cause {
				bad("order %s was cancelled by %s but released %s with cause %s", id, ce.Cause, key, r.Cause)
			}
		}
		if !maps.Equal(wantRel, gotRel) {
			bad("order %s (%s) released %v, want %v", id, o.Status, gotRel, wantRel)
		}

		if !holdMatches(s.CouponHolds, id, o.CouponID, nil) {
			bad("order %s names coupon %q but its coupon hold is %+v", id, deref(o.CouponID), s.CouponHolds[id])
		}
		if !holdMatches(s.PointsHolds, id, o.PointsAccount, o.Points) {
			bad("order %s names %v points of account %q but its points hold is %+v", id, derefInt(o.Points), deref(o.PointsAccount), s.PointsHolds[id])
		}
		for kind, holds := range map[string]map[string]Hold{"coupon": s.CouponHolds, "points": s.PointsHolds} {
			h, ok := holds[id]
			if !ok {
				continue
			}
			wantUsed, wantReleased := Paid(o.Status), Cancelled(o.Status)
			if h.Used != wantUsed || h.Released != wantReleased {
				bad("order %s is %s but its %s hold of %s has used %v, released %v", id, o.Status, kind, h.Resource, h.Used, h.Released)
			}
		}
	}
	for id := range released {
		if _, ok := s.Orders[id]; !ok {
			bad("releases of order %s, which does not exist", id)
		}
	}

	// 3. Stock, points and coupons conserved.
	live := make(map[string]int64)
	sold := make(map[string]int64)
	for _, o := range s.Orders {
		for sku, qty := range o.Items {
			switch {
			case Live(o.Status):
				live[sku] += qty
			case Paid(o.Status):
				sold[sku] += qty
			}
		}
	}
	skus := slices.Sorted(maps.Keys(s.Stock))
	for sku := range live {
		if _, ok := s.Stock[sku]; !ok {
			bad("orders hold sku %s, which has no stock row", sku)
		}
	}
	for _, sku := range skus {
		st := s.Stock[sku]
		if st.Reserved != live[sku] {
			bad("sku %s: reserved %d but live orders hold %d", sku, st.Reserved, live[sku])
		}
		if st.Sold != sold[sku] {
			bad("sku %s: sold %d but paid orders bought %d", sku, st.Sold, sold[sku])
		}
		if st.Available < 0 || st.Reserved < 0 || st.Sold < 0 {
			bad("sku %s: negative stock %+v", sku, st)
		}
		if want.Stock != nil {
			total, ok := want.Stock[sku]
			if got := st.Available + st.Reserved + st.Sold; !ok || got != total {
				bad("sku %s: available %d + reserved %d + sold %d = %d, want %d", sku, st.Available, st.Reserved, st.Sold, got, total)
			}
		}
	}
	for sku := range want.Stock {
		if _, ok := s.Stock[sku]; !ok {
			bad("sku %s has no stock row", sku)
		}
	}
	held := make(map[string]int64)
	spent := make(map[string]int64)
	for _, h := range s.PointsHolds {
		switch {
		case h.Used:
			spent[h.Resource] += h.Qty
		case !h.Released:
			held[h.Resource] += h.Qty
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Accounts)) {
		a := s.Accounts[id]
		if a.Held != held[id] {
			bad("points account %s: held %d but live holds add up to %d", id, a.Held, held[id])
		}
		if a.Held > a.Balance || a.Held < 0 {
			bad("points account %s: held %d of balance %d", id, a.Held, a.Balance)
		}
		if want.Points != nil {
			if initial := want.Points[id]; a.Balance+spent[id] != initial {
				bad("points account %s: balance %d + spent %d = %d, want %d", id, a.Balance, spent[id], a.Balance+spent[id], initial)
			}
		}
	}
	liveCoupon := make(map[string]string)
	for _, id := range slices.Sorted(maps.Keys(s.CouponHolds)) {
		h := s.CouponHolds[id]
		if h.Released {
			continue
		}
		if other, ok := liveCoupon[h.Resource]; ok {
			bad("coupon %s is held by orders %s and %s at once", h.Resource, other, id)
		}
		liveCoupon[h.Resource] = id
	}

	// 4. No PENDING order left past its deadline.
	if want.Overdue > 0 {
		for _, id := range slices.Sorted(maps.Keys(s.Orders)) {
			o := s.Orders[id]
			if o.Status == "PENDING" && o.CancelAt.Before(s.Now.Add(-want.Overdue)) {
				bad("order %s is PENDING %v past its cancel_at (check job %v)", id, s.Now.Sub(o.CancelAt), derefInt(o.CheckJobID))
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

// maxAmount is the bound every amount stays below: 10^15.
var maxAmount = new(big.Rat).SetInt64(1_000_000_000_000_000)

// ValidAmount reports whether a (numeric as text) is an amount of money: a
// finite number from 0 to below 10^15. NaN and the infinities are not.
func ValidAmount(a string) bool {
	r, ok := new(big.Rat).SetString(a)
	return ok && r.Sign() >= 0 && r.Cmp(maxAmount) < 0
}

// SameAmount reports whether a and b (numeric as text) are the same number,
// as PostgreSQL compares numerics: 100.00 and 100.0 are.
func SameAmount(a, b string) bool {
	x, okX := new(big.Rat).SetString(a)
	y, okY := new(big.Rat).SetString(b)
	return okX && okY && x.Cmp(y) == 0
}

// holdMatches reports whether the hold of orderID in holds is the one the
// order names (resource, and qty unless nil), or absent when it names none.
func holdMatches(holds map[string]Hold, orderID string, resource *string, qty *int64) bool {
	h, ok := holds[orderID]
	if resource == nil {
		return !ok
	}
	return ok && h.Resource == *resource && (qty == nil || h.Qty == *qty)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
