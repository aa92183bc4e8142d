package model

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
	"github.com/ordertimeout/ordertimeout/tests/internal/dbstate"
)

// gatewayCheckReason is the reason cancel_checked gives its cancels.
const gatewayCheckReason = "gateway check: not paid"

// verify compares the drained database with what the calls answered. Each
// order's event log is the witness of the order in which its calls took
// effect (every transition holds the order's row lock while it logs); every
// answer must be explained by it, and every event by an answer.
func (m *model) verify(s *dbstate.State) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	events := s.EventsOf()
	callsOf := make(map[string][]*call)
	for _, c := range m.calls {
		if c.Order != "" {
			callsOf[c.Order] = append(callsOf[c.Order], c)
		}
	}
	conflictByPayment := make(map[string]dbstate.Conflict)
	conflictByID := make(map[int64]dbstate.Conflict)
	for _, c := range s.Conflicts {
		conflictByPayment[c.PaymentID] = c
		conflictByID[c.ID] = c
	}
	reinstatedOrders := make(map[string]bool)
	for _, c := range s.Conflicts {
		if deref(c.Resolution) == "reinstated" {
			reinstatedOrders[c.OrderID] = true
		}
	}
	reinstated := func(orderID string) bool { return reinstatedOrders[orderID] }

	// Existence and content: an order exists exactly when one create call
	// created it, with the content of the spec and the time it was given.
	for _, o := range m.orders {
		id := o.spec.ID
		var created []*call
		var extended time.Duration
		for _, c := range callsOf[id] {
			switch {
			case c.Op == "create" && c.Code == "" && c.Created:
				created = append(created, c)
			case c.Op == "extend" && c.Code == "":
				by, _ := time.ParseDuration(c.Arg)
				extended += by
			}
		}
		got, exists := s.Orders[id]
		switch {
		case len(created) > 1:
			bad("order %s was created by %d calls: %v and %v", id, len(created), created[0], created[1])
		case exists && len(created) == 0:
			bad("order %s exists but no create_order call answered created", id)
		case !exists && len(created) == 1:
			bad("order %s does not exist but %v created it", id, created[0])
		}
		if !exists {
			continue
		}
		want := make(map[string]int64)
		for _, it := range o.spec.Items {
			want[it.SKU] = it.Qty
		}
		if !maps.Equal(got.Items, want) {
			bad("order %s has items %v, want %v", id, got.Items, want)
		}
		if deref(got.CouponID) != o.spec.Coupon || deref(got.PointsAccount) != o.spec.Account ||
			(got.Points != nil && *got.Points != o.spec.Points) || deref(got.Amount) != o.spec.Amount ||
			deref(got.Currency) != o.spec.Currency {
			bad("order %s has coupon %q, points %v of %q, amount %q %q; want %q, %d of %q, %q %q", id,
				deref(got.CouponID), got.Points, deref(got.PointsAccount), deref(got.Amount), deref(got.Currency),
				o.spec.Coupon, o.spec.Points, o.spec.Account, o.spec.Amount, o.spec.Currency)
		}
		if d := got.ExpireAt.Sub(got.CreatedAt); d != o.spec.Timeout+extended {
			bad("order %s expires %v after its creation, want %v + %v extended", id, d, o.spec.Timeout, extended)
		}
		// No grace: cancel_at is expire_at, or later when a payment began
		// (never before the gateway's expiry; extensions move it further).
		switch {
		case got.GatewayExpireAt == nil && !got.CancelAt.Equal(got.ExpireAt):
			bad("order %s has cancel_at %v, want expire_at %v (no grace, no payment begun)", id, got.CancelAt, got.ExpireAt)
		case got.CancelAt.Before(got.ExpireAt):
			bad("order %s has cancel_at %v before expire_at %v", id, got.CancelAt, got.ExpireAt)
		case got.GatewayExpireAt != nil && got.CancelAt.Before(*got.GatewayExpireAt):
			bad("order %s has cancel_at %v before the gateway's expiry %v", id, got.CancelAt, *got.GatewayExpireAt)
		}
		if got.Status != "PAID" && !dbstate.Cancelled(got.Status) {
			bad("order %s is %s after the drain", id, got.Status)
		}
	}
	for id := range s.Orders {
		if m.byID[id] == nil {
			bad("order %s exists but the model never created it", id)
		}
	}

	// Per payment: whether some confirmation gave it the order's amount and
	// currency (or none), and whether some gave another.
	calledRight := make(map[string]bool)
	calledWrong := make(map[string]bool)
	for _, c := range m.calls {
		if c.Code != "" || c.Payment == "" || !(c.Op == "confirm" || c.Op == "check" && c.Arg == "confirm") {
			continue
		}
		if c.Wrong {
			calledWrong[c.Payment] = true
		} else {
			calledRight[c.Payment] = true
		}
	}

	// Every answer against the event log.
	type counts struct{ sweepCancelled, sweepCaught, sweepChecks, closed, checksDone int }
	var n counts
	lost := make(map[string]bool)
	resolutions := make(map[int64][]*call)
	for _, c := range m.calls {
		evs := events[c.Order]
		o := s.Orders[c.Order]
		switch c.Op {
		case "begin":
			if c.Repeat {
				break
			}
			begun := countEvents(evs, func(e dbstate.Event) bool { return isBegin(e) && e.DetailString("payment_id") == c.Payment })
			_, paymentExists := s.Payments[c.Payment]
			switch {
			case c.Code == "" && (begun != 1 || !paymentExists):
				bad("%v: %d events of the payment starting, payment row %v; want 1 and a row", c, begun, paymentExists)
			case c.Code != "" && (begun != 0 || paymentExists):
				bad("%v: the refused payment left %d events, payment row %v", c, begun, paymentExists)
			}
		case "confirm", "check":
			if c.Code == sqlstate.OtherMoneyForPayment {
				if why := otherMoney(c, s.Payments[c.Payment], m.byID[c.Order]); why != "" {
					bad("%v: %s", c, why)
				}
				break
			}
			if c.Code != "" || c.Payment == "" {
				if c.Op == "check" && c.Code == "" {
					n.checksDone++
				}
				break
			}
			if c.Op == "check" {
				n.checksDone++
			}
			p := s.Payments[c.Payment]
			switch c.Result {
			case "paid":
				paidBy := countEvents(evs, func(e dbstate.Event) bool {
					return e.To == "PAID" && e.Cause == "payment" && e.DetailString("payment_id") == c.Payment
				})
				cf, hasConflict := conflictByPayment[c.Payment]
				if o == nil || o.Status != "PAID" || p == nil || p.Status != "confirmed" ||
					(paidBy != 1 && !(hasConflict && deref(cf.Resolution) == "reinstated")) {
					bad("%v: the order is %v, the payment %v, %d events of this payment paying it", c, statusOf(o), p, paidBy)
				}
				if c.Wrong && !calledRight[c.Payment] {
					bad("%v: the wrong amount or currency answered paid, and no confirmation of the payment gave the right one", c)
				}
			case "conflict":
				cf, ok := conflictByPayment[c.Payment]
				if !ok {
					bad("%v: no conflict row for the payment", c)
					break
				}
				var at *dbstate.Event
				for _, e := range evs {
					if id, ok := e.DetailInt("conflict_id"); ok && id == cf.ID && e.Cause == "payment" {
						at = &e
						break
					}
				}
				switch {
				case at == nil:
					bad("%v: no event recorded conflict %d", c, cf.ID)
				case cf.Kind == "late_payment" && !dbstate.Cancelled(deref(at.From)),
					cf.Kind == "double_payment" && !dbstate.Paid(deref(at.From)),
					cf.Kind == "amount_mismatch" && dbstate.Paid(deref(at.From)):
					bad("%v: conflict %d is a %s but the order was %s then", c, cf.ID, cf.Kind, deref(at.From))
				case cf.Kind == "late_payment" && !calledRight[c.Payment],
					cf.Kind == "amount_mismatch" && !calledWrong[c.Payment]:
					bad("%v: conflict %d is a %s, but %s", c, cf.ID, cf.Kind,
						map[bool]string{true: "every confirmation of the payment gave a wrong amount or currency",
							false: "no confirmation of the payment gave a wrong amount or currency"}[cf.Kind == "late_payment"])
				case at.To != map[string]string{"CLOSED": "CANCELLED"}[deref(at.From)] && at.To != deref(at.From):
					bad("%v: conflict %d took the order from %s to %s", c, cf.ID, deref(at.From), at.To)
				}
			}
		case "cancel":
			if c.Code != "" {
				break
			}
			var mine []dbstate.Event
			for _, e := range evs {
				if e.DetailString("reason") == c.Arg {
					mine = append(mine, e)
				}
			}
			switch {
			case c.Result == "true" && len(mine) != 1:
				bad("%v: %d events carry its reason, want 1", c, len(mine))
			case c.Result == "true":
				e := mine[0]
				if deref(e.From) != "PENDING" || e.To != "CANCELLED" || e.Cause != "requested" || e.Actor != actorOf(c.Session) {
					bad("%v: its event is %s -> %s by %s, actor %s", c, deref(e.From), e.To, e.Cause, e.Actor)
				}
				if !dbstate.Cancelled(statusOf(o)) && !(statusOf(o) == "PAID" && reinstated(c.Order)) {
					bad("%v: the order ends %s", c, statusOf(o))
				}
			case len(mine) != 0:
				bad("%v: answered false but cancelled the order (event %d)", c, mine[0].ID)
			}
		case "sweep":
			if c.Code == "" {
				n.sweepCancelled += c.N[1]
				n.sweepCaught += c.N[2]
				n.sweepChecks += c.N[3]
			}
		case "close":
			if c.Code == "" {
				n.closed += c.N[0]
			}
		case "resolve", "claim":
			if c.Code == "" {
				resolutions[c.Conflict] = append(resolutions[c.Conflict], c)
			}
			if c.Code == sqlstate.ConflictRefunding && deref(conflictByID[c.Conflict].Resolution) != "refunded" {
				bad("%v: refused as being refunded, but the conflict ends resolved %q", c, deref(conflictByID[c.Conflict].Resolution))
			}
			if c.Code == sqlstate.ConflictResolved {
				if cf := conflictByID[c.Conflict]; cf.Resolution == nil || *cf.Resolution == map[string]string{
					"reinstate": "reinstated", "refund": "refunded", "manual": "manual"}[c.Arg] {
					bad("%v: refused as resolved another way, but the conflict ends resolved %v", c, cf.Resolution)
				}
			}
		case "lose-timer":
			if c.Lost {
				lost[c.Order] = true
			}
		}
	}

	out = append(out, checkFailBacks(m.calls, s)...)

	// Counts returned by the set-based calls against the events they wrote.
	var timeouts, caught, closed, checkCancels, extends int
	checkCancelsOf := make(map[string]int)
	for _, e := range s.Events {
		switch {
		case e.To == "CANCELLED" && deref(e.From) == "PENDING" && e.DetailString("reason") == gatewayCheckReason:
			checkCancels++
			checkCancelsOf[e.OrderID]++
		case e.To == "CANCELLED" && deref(e.From) == "PENDING" && (e.Cause == "timeout" || e.Cause == "sweep"):
			timeouts++
			if e.Cause == "sweep" {
				caught++
				if !lost[e.OrderID] {
					bad("order %s was caught by the fallback sweep (event %d), but the test never deleted its timer row: the API lost it", e.OrderID, e.ID)
				}
			}
		case e.To == "CLOSED" && deref(e.From) == "CANCELLED":
			closed++
		case e.To == "PENDING" && deref(e.From) == "PENDING" && e.Cause == "requested":
			extends++
		}
	}
	// caught_by_sweep counts the orders found without their timer row, some
	// of which went to a gateway check rather than being cancelled.
	if timeouts != n.sweepCancelled || caught > n.sweepCaught {
		bad("sweep_due answered %d cancelled and %d caught by the fallback, the events show %d timeout cancels, %d of them by the fallback",
			n.sweepCancelled, n.sweepCaught, timeouts, caught)
	}
	if closed != n.closed {
		bad("close_cancelled answered %d closed, the events show %d", n.closed, closed)
	}
	checkAnswers := 0
	for _, c := range m.calls {
		if c.Op == "check" && c.Code == "" && c.Result == "true" {
			checkAnswers++
		}
		if c.Op == "extend" && c.Code == "" {
			extends--
		}
	}
	if checkCancels != checkAnswers {
		bad("cancel_checked answered true %d times, the events show %d", checkAnswers, checkCancels)
	}
	if extends != 0 {
		bad("extend_deadline calls and PENDING -> PENDING events differ by %d", extends)
	}

	// Conflicts: resolved once, every answer the same (a refund claimed is
	// the refund that ends it), one event each; an amount mismatch only
	// where a call gave a wrong amount or currency.
	for _, cf := range s.Conflicts {
		if cf.Kind == "amount_mismatch" && !calledWrong[cf.PaymentID] {
			bad("conflict %d on order %s is an amount mismatch, but no call gave payment %s a wrong amount or currency", cf.ID, cf.OrderID, cf.PaymentID)
		}
		resolvedBy := 0
		for _, e := range events[cf.OrderID] {
			if id, resolution, ok := dbstate.ResolutionOf(e); ok && id == cf.ID && resolution != "refunding" {
				resolvedBy++
				if deref(cf.Resolution) == "reinstated" && e.To != "PAID" {
					bad("conflict %d was reinstated by event %d to %s", cf.ID, e.ID, e.To)
				}
			}
		}
		if want := map[bool]int{true: 1, false: 0}[cf.Resolution != nil]; resolvedBy != want {
			bad("conflict %d (resolution %v) has %d resolution events, want %d", cf.ID, deref(cf.Resolution), resolvedBy, want)
		}
		for _, c := range resolutions[cf.ID] {
			if outcomeOf(c.Result) != deref(cf.Resolution) {
				bad("%v: the conflict ends resolved %q", c, deref(cf.Resolution))
			}
		}
	}
	out = append(out, m.verifyMoney(s)...)

	// River's job rows after the drain.
	var expires, checks int
	paymentChecks := make(map[string]int)
	closes := make(map[string]int)
	for _, j := range s.Jobs {
		orderID, _ := j.Args["order_id"].(string)
		switch j.Kind {
		case timer.Name:
			expires++
		case "ordertimeout_precancel_check":
			checks++
		case "ordertimeout_payment_check":
			paymentChecks[orderID]++
		case "ordertimeout_gateway_close":
			closes[orderID]++
		}
	}
	if expires != 0 {
		bad("%d timer rows are left after the drain", expires)
	}
	if checks != 0 {
		bad("%d gateway check jobs are left after the drain", checks)
	}
	if n.sweepChecks != n.checksDone+checks {
		bad("sweep_due answered %d checks, %d jobs were worked and %d are left", n.sweepChecks, n.checksDone, checks)
	}
	for _, id := range slices.Sorted(maps.Keys(s.Orders)) {
		evs := events[id]
		// Every payment begun queues a payment check; the payment that makes
		// the order PAID deletes the check queued last (no River worker runs
		// here, so none has started it).
		begun := countEvents(evs, isBegin)
		want := begun - countEvents(evs, func(e dbstate.Event) bool { return deref(e.From) == "PAYING" && e.To == "PAID" })
		if paymentChecks[id] != want {
			bad("order %s has %d payment check jobs for %d payments begun, want %d", id, paymentChecks[id], begun, want)
		}
		wantClose, attempted := 0, false
		for _, e := range evs {
			if e.To == "PAYING" {
				attempted = true
			}
			if e.To == "CANCELLED" && deref(e.From) == "PENDING" && attempted {
				wantClose = 1
			}
		}
		if closes[id] != wantClose {
			bad("order %s has %d gateway close jobs, want %d", id, closes[id], wantClose)
		}
	}
	return out
}

// checkFailBacks judges fail_payment's "pending" answers on the complete
// history, never while walking it: the calls are recorded in the order they
// returned, and a call that answered "ignored" may return before a
// concurrent one that answered "pending" (and took effect first), so no
// answer is judged until every answer is counted.
//
// A payment fails its order back to PENDING at most once, exactly when one
// call answered "pending" (one event per such answer). And that call must
// be the first to settle the payment: fail_payment and confirm_payment both
// end a started payment, so a call of either on the same payment that
// answered (any answer) and returned before the "pending" call began took
// effect before it, and would have left it nothing to fail.
func checkFailBacks(calls []*call, s *dbstate.State) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	pending := make(map[string][]*call) // per payment, the calls that answered pending
	settled := make(map[string][]*call) // per payment, every answered fail or confirm
	for _, c := range calls {
		if c.Code != "" || c.Payment == "" {
			continue
		}
		switch {
		case c.Op == "fail":
			settled[c.Payment] = append(settled[c.Payment], c)
			if c.Result == "pending" {
				pending[c.Payment] = append(pending[c.Payment], c)
			}
		case c.Op == "confirm", c.Op == "check" && c.Arg == "confirm":
			settled[c.Payment] = append(settled[c.Payment], c)
		}
	}

	failedBack := make(map[string]int)
	for _, e := range s.Events {
		if deref(e.From) == "PAYING" && e.To == "PENDING" && e.Detail["failed"] == true {
			failedBack[e.DetailString("payment_id")]++
		}
	}
	payments := slices.Sorted(maps.Keys(s.Payments))
	for p := range pending {
		if s.Payments[p] == nil {
			payments = append(payments, p)
		}
	}
	for _, p := range payments {
		if n := failedBack[p]; n != len(pending[p]) || n > 1 {
			bad("payment %s (order %s): %d events of failing back to PENDING, %d calls answered pending %v",
				p, orderOf(s, p), n, len(pending[p]), pending[p])
		}
		for _, pc := range pending[p] {
			for _, c := range settled[p] {
				if c != pc && c.End.Before(pc.Start) {
					bad("%v: answered pending, but %v had settled the payment before it began", pc, c)
				}
			}
		}
	}
	return out
}

// orderOf returns the order of payment p, or "?" when there is no such payment.
func orderOf(s *dbstate.State, p string) string {
	if pay := s.Payments[p]; pay != nil {
		return pay.OrderID
	}
	return "?"
}

// requireCoverage fails a run big enough to show them when the interesting
// cases did not happen: then the test proves less than it claims. (A machine
// so loaded that the sessions made few calls is let off.)
func (m *model) requireCoverage(t *testing.T) {
	t.Helper()
	if len(m.orders) < 100 || len(m.calls) < 4000 {
		t.Logf("model: %d calls on %d orders: too few to require coverage", len(m.calls), len(m.orders))
		return
	}
	seen := make(map[string]bool)
	for _, c := range m.calls {
		switch {
		case c.Code != "":
			seen[c.Op+":"+c.Code] = true
		case c.Op == "sweep" && c.Session >= 0 && c.N[1] > 0:
			seen["sweep:cancelled"] = true
		default:
			seen[c.Op+":"+c.Result] = true
		}
	}
	for _, want := range []string{"create:" + sqlstate.InsufficientStock, "sweep:cancelled", "confirm:paid", "confirm:conflict", "cancel:true",
		"confirm:" + sqlstate.InvalidAmount, "confirm:" + sqlstate.InvalidCurrency, "create:" + sqlstate.InvalidAmount, "claim:refunding", "finish:refunded", "resolve:" + sqlstate.ConflictRefunding} {
		require.True(t, seen[want], "seed %d: the run never saw %s", m.seed, want)
	}
}

// isBegin reports whether e is begin_payment's event.
func isBegin(e dbstate.Event) bool {
	_, ok := e.Detail["paying_until"]
	return e.To == "PAYING" && e.Cause == "payment" && ok
}

func countEvents(evs []dbstate.Event, match func(dbstate.Event) bool) int {
	n := 0
	for _, e := range evs {
		if match(e) {
			n++
		}
	}
	return n
}

func statusOf(o *dbstate.Order) string {
	if o == nil {
		return "missing"
	}
	return o.Status
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// verifyMoney checks the money dimension of the run against the drained
// database: refused amounts left no trace; every refund the gateway made is
// the recorded resolution of its conflict, by the same refund id, and no
// conflict is recorded refunded that the gateway never refunded; no refund is
// left half done; every refund claimed ended refunded.
func (m *model) verifyMoney(s *dbstate.State) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	conflictByPayment := make(map[string]dbstate.Conflict)
	for _, cf := range s.Conflicts {
		conflictByPayment[cf.PaymentID] = cf
	}
	mentions := make(map[string][]int64) // payment id -> events naming it
	for _, e := range s.Events {
		if p := e.DetailString("payment_id"); p != "" {
			mentions[p] = append(mentions[p], e.ID)
		}
	}
	for _, c := range m.calls {
		switch {
		case c.Poison && c.Op == "confirm" && strings.HasPrefix(c.Payment, "poison-"):
			_, hasPayment := s.Payments[c.Payment]
			_, hasConflict := conflictByPayment[c.Payment]
			if hasPayment || hasConflict || len(mentions[c.Payment]) > 0 {
				bad("%v: refused, but left a payment row %v, a conflict %v, events %v", c, hasPayment, hasConflict, mentions[c.Payment])
			}
		case c.Op == "finish" && c.Fault == "" && c.Code == "":
			if cf := conflictByPayment[c.Payment]; deref(cf.Resolution) != "refunded" {
				bad("%v: recorded, but the conflict ends %s %q", c, cf.State, deref(cf.Resolution))
			}
		case c.Op == "finish-out-of-turn" && strings.HasPrefix(c.Arg, "refund-bogus-"):
			if cf := conflictByPayment[c.Payment]; deref(cf.RefundID) == c.Arg {
				bad("%v: on a conflict not being refunded, but it recorded its refund id", c)
			}
		}
	}

	m.mu.Lock()
	refunds := maps.Clone(m.refunds)
	m.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(refunds)) {
		cf, ok := conflictByPayment[p]
		pay := s.Payments[p]
		switch {
		case !ok || pay == nil:
			bad("payment %s was refunded at the gateway but has no conflict (%v) or no payment row (%v)", p, ok, pay != nil)
		case deref(cf.Resolution) != "refunded" || deref(cf.RefundID) != refunds[p] || pay.Status != "refunded":
			bad("payment %s of order %s was refunded at the gateway (%s), but conflict %d is %s %q with refund id %q and the payment is %s",
				p, cf.OrderID, refunds[p], cf.ID, cf.State, deref(cf.Resolution), deref(cf.RefundID), pay.Status)
		}
	}
	for _, cf := range s.Conflicts {
		switch {
		case cf.State == "refunding":
			bad("conflict %d on order %s is still refunding after the drain", cf.ID, cf.OrderID)
		case deref(cf.Resolution) == "refunded" && refunds[cf.PaymentID] == "":
			bad("conflict %d on order %s is recorded refunded, but the gateway never refunded payment %s", cf.ID, cf.OrderID, cf.PaymentID)
		}
	}
	return out
}

// otherMoney returns why confirmation c, refused with OT157, was not a
// confirmation of other money than payment p (as the drained database has
// it) was confirmed with: "" when it was. The money it is compared with is
// p's amount, or for a payment confirmed without one its order's, and p's
// currency (its order's when the confirmation gave none). A payment's
// amount changes only from none to one (a conflict that learned it), so a
// refused call is compared with what the payment ends with, or, when it
// ended with none, with nothing (only its currency can differ).
func otherMoney(c *call, p *dbstate.Payment, o *order) string {
	if p == nil || o == nil {
		return "" // purged: nothing left to compare with
	}
	known := deref(p.Amount)
	if known == "" && p.Status == "confirmed" {
		known = o.spec.Amount
	}
	cur := deref(p.Currency)
	if cur == "" {
		cur = o.spec.Currency
	}
	if c.Op == "check" {
		// The gateway's answer: the order's amount, in its currency.
		if differ(o.spec.Amount, known) || o.spec.Currency != "" && cur != "" && o.spec.Currency != cur {
			return ""
		}
		return fmt.Sprintf("refused with OT157, but the payment is %s %s and the check said %s %s", known, cur, o.spec.Amount, o.spec.Currency)
	}
	if differ(c.Arg, known) || c.Currency != "" && cur != "" && c.Currency != cur {
		return ""
	}
	return fmt.Sprintf("refused with OT157, but the payment is %s %s and the call said %s %s", known, cur, c.Arg, c.Currency)
}

// differ says whether amounts a and b (decimal text, "" for none) are both
// given and are different numbers.
func differ(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	x, okx := new(big.Rat).SetString(a)
	y, oky := new(big.Rat).SetString(b)
	return !okx || !oky || x.Cmp(y) != 0
}
