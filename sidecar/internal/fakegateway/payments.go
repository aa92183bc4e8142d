package fakegateway

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// DefaultCurrency is the currency the fake lists a payment in when it was
// made without one (the demo's shop sells in euros).
const DefaultCurrency gateway.Currency = "EUR"

// defaultPaymentsLimit is the limit of GET /v1/payments without one.
const defaultPaymentsLimit = 100

// ledger is the fake's records for GET /v1/payments: every payment it took
// (also silent ones, whose callback never comes) and every refund, once
// each, stamped with this host's clock (the gateway's), strictly increasing. Its methods run with
// Server.mu held.
type ledger struct {
	entries []gateway.Payment
	seen    map[[2]string]bool
	// lastNow is the time of the newest entry stamped with this host's
	// clock: those are strictly increasing. (An entry given its paid_at
	// is not among them: one in the future must not drag the clock's
	// entries after it.)
	lastNow time.Time
}

func (l *ledger) add(p gateway.Payment) {
	if l.seen == nil {
		l.seen = map[[2]string]bool{}
	}
	// A payment is listed once however often it is recorded paid; every
	// refund is listed (a payment refunded in two parts, twice).
	k := [2]string{p.PaymentID, p.Status}
	if l.seen[k] && p.Status != gateway.PaymentRefunded {
		return
	}
	l.seen[k] = true
	if p.Currency == "" {
		p.Currency = DefaultCurrency
	}
	if !p.At.IsZero() {
		// When the payment was taken, as the answers about its order say
		// (paid_at): the listing sorts by it.
		p.At = p.At.UTC().Truncate(time.Microsecond)
		l.entries = append(l.entries, p)
		return
	}
	// Strictly increasing times, so that a client paging from the last at
	// always moves on.
	p.At = time.Now().UTC().Truncate(time.Microsecond)
	if !p.At.After(l.lastNow) {
		p.At = l.lastNow.Add(time.Microsecond)
	}
	l.lastNow = p.At
	l.entries = append(l.entries, p)
}

// paid records the payment of order o. A payment without an amount is not
// listed: the contract requires one.
func (l *ledger) paid(orderID string, o *order) {
	if o.paymentID == "" || o.amount == "" {
		return
	}
	p := gateway.Payment{PaymentID: o.paymentID, OrderID: orderID, Amount: o.amount, Currency: o.currency, Status: gateway.PaymentPaid}
	if o.paidAt != nil {
		p.At = o.paidAt.Time
	}
	l.add(p)
}

// refunded records a refund of the payment req names, of its amount (the
// payment's when the request has none).
func (l *ledger) refunded(req gateway.RefundRequest, o *order) {
	amount, currency := req.Amount, o.currency
	if amount == "" {
		amount = o.amount
	}
	if amount == "" {
		return
	}
	l.add(gateway.Payment{PaymentID: req.PaymentID, OrderID: req.OrderID, Amount: amount, Currency: currency, Status: gateway.PaymentRefunded})
}

// Payments returns what GET /v1/payments lists, oldest first.
func (s *Server) Payments() []gateway.Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedPayments()
}

func (s *Server) sortedPayments() []gateway.Payment {
	out := append([]gateway.Payment(nil), s.ledger.entries...)
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].PaymentID < out[j].PaymentID
	})
	return out
}

// listPayments serves GET /v1/payments?since=<RFC 3339>&limit=N.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := time.Parse(time.RFC3339Nano, q.Get("since"))
	if err != nil {
		http.Error(w, "since must be an RFC 3339 time", http.StatusBadRequest)
		return
	}
	limit := defaultPaymentsLimit
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > gateway.MaxPaymentsLimit {
			http.Error(w, "limit must be 1 to 1000", http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	s.stats.PaymentLists++
	s.mu.Unlock()
	if !s.answer(w, r, "") {
		return
	}
	s.mu.Lock()
	all := s.sortedPayments()
	s.mu.Unlock()
	out := struct {
		Payments []gateway.Payment `json:"payments"`
		HasMore  bool              `json:"has_more"`
	}{Payments: []gateway.Payment{}}
	for _, p := range all {
		if p.At.Before(since) {
			continue
		}
		if len(out.Payments) == limit {
			out.HasMore = true
			break
		}
		out.Payments = append(out.Payments, p)
	}
	writeJSON(w, http.StatusOK, out)
}
