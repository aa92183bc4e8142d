package fakegateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// Behaviours of an order (Behaviour.Behaviour).
const (
	Instant = "instant"
	Late    = "late"
	Silent  = "silent"
	Decline = "decline"
	Down    = "down"
	Slow    = "slow"
	// QR is Alipay's QR code: the gateway knows no trade (status none,
	// TRADE_NOT_EXIST) for the first NoneQueries queries, until the buyer
	// scans; then the payment is there, paid, and no callback comes.
	QR = "qr"
	// PayOnClose is WeChat Pay's ORDERPAID: queries answer pending, and the
	// buyer pays as the close arrives, so the close answers paid.
	PayOnClose = "pay_on_close"
	// Normal is the default behaviour of the whole gateway.
	Normal = "normal"
)

// callbackTimeout bounds one callback into the database.
const callbackTimeout = 10 * time.Second

// callbackTries is how many times a callback the database asks to be made
// again is made.
const callbackTries = 5

// Behaviour is the body of POST /_fake/orders/{order_id} and of POST
// /_fake/gateway.
type Behaviour struct {
	Behaviour string           `json:"behaviour"`
	DelayMS   int              `json:"delay_ms,omitempty"`
	PaymentID string           `json:"payment_id,omitempty"`
	Amount    gateway.Amount   `json:"amount,omitempty"`
	Currency  gateway.Currency `json:"currency,omitempty"`
	// NoneQueries is how many queries behaviour qr answers none.
	NoneQueries int `json:"none_queries,omitempty"`
	// PaidAt, if set, is when GET /v1/orders/{order_id} says the
	// payment was taken (paid answers only); unset, it does not say.
	PaidAt *gateway.Timestamp `json:"paid_at,omitempty"`
}

// OrderState is what the fake knows about one order (GET
// /_fake/orders/{order_id}).
type OrderState struct {
	OrderID   string             `json:"order_id"`
	Behaviour string             `json:"behaviour"`
	Status    string             `json:"status"`
	PaymentID string             `json:"payment_id,omitempty"`
	Amount    gateway.Amount     `json:"amount,omitempty"`
	Currency  gateway.Currency   `json:"currency,omitempty"`
	PaidAt    *gateway.Timestamp `json:"paid_at,omitempty"`
	Closed    bool               `json:"closed"`
	Closes    int                `json:"closes"`
	Refunds   int                `json:"refunds"`
}

// Stats counts what the fake was asked (GET /_fake/stats).
type Stats struct {
	Queries        int `json:"queries"`
	Closes         int `json:"closes"`
	Refunds        int `json:"refunds"`
	RefundRequests int `json:"refund_requests"`
	Callbacks      int `json:"callbacks"`
	CallbackErrors int `json:"callback_errors"`
	PaymentLists   int `json:"payment_lists"`
}

// Server is the fake gateway, an http.Handler. Create it with New; call Close
// when done to stop pending late payments.
type Server struct {
	// DB, if set, receives the payment callbacks.
	DB *pgxpool.Pool

	// Logger logs callbacks and their errors. If nil, slog.Default() is used.
	Logger *slog.Logger

	mux *http.ServeMux

	mu      sync.Mutex
	orders  map[string]*order
	global  Behaviour
	refunds map[string]gateway.Refund // by idempotency key
	stats   Stats
	timers  map[*time.Timer]struct{}
	ledger  ledger
	closed  bool
	pending sync.WaitGroup // late payments being completed
}

type order struct {
	behaviour string
	delay     time.Duration
	status    string
	paymentID string
	amount    gateway.Amount
	currency  gateway.Currency
	paidAt    *gateway.Timestamp
	closed    bool
	closes    int
	refunds   int
	// noneQueries is how many more queries answer none (behaviour qr).
	noneQueries int
}

// New returns a fake gateway calling back into db (which may be nil).
func New(db *pgxpool.Pool, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		DB:      db,
		Logger:  logger,
		orders:  make(map[string]*order),
		global:  Behaviour{Behaviour: Normal},
		refunds: make(map[string]gateway.Refund),
		timers:  make(map[*time.Timer]struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/refunds", s.refund)
	mux.HandleFunc("GET /v1/payments", s.listPayments)
	mux.HandleFunc("POST /_fake/gateway", s.setGateway)
	mux.HandleFunc("GET /_fake/stats", s.showStats)
	s.mux = mux
	return s
}

// ServeHTTP serves the gateway and control APIs.
//
// The routes with an order id are matched on the escaped path, segment by
// segment, before http.ServeMux would clean it: an id "..", "a/b" or "a//b"
// (sent as %2E%2E, a%2Fb, a%2F%2Fb) reaches its own order instead of being
// redirected or resolved to another path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, route := range []struct {
		prefix, rest, method string
		handle               func(http.ResponseWriter, *http.Request, string)
	}{
		{"/v1/orders/", "", http.MethodGet, s.getOrder},
		{"/v1/orders/", "/close", http.MethodPost, s.closeOrder},
		{"/_fake/orders/", "", http.MethodPost, s.setOrder},
		{"/_fake/orders/", "", http.MethodGet, s.showOrder},
		{"/_fake/orders/", "/refund", http.MethodPost, s.refundOutside},
	} {
		tail, ok := strings.CutPrefix(r.URL.EscapedPath(), route.prefix)
		if !ok {
			continue
		}
		segment, rest, _ := strings.Cut(tail, "/")
		if rest != "" || strings.HasSuffix(tail, "/") {
			rest = "/" + rest
		}
		if rest != route.rest || r.Method != route.method {
			continue
		}
		id, err := url.PathUnescape(segment)
		if err != nil || id == "" {
			http.Error(w, "malformed order id in path", http.StatusBadRequest)
			return
		}
		route.handle(w, r, id)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close cancels late payments not yet completed and waits for those being
// completed.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for t := range s.timers {
		if t.Stop() {
			s.pending.Done()
		}
	}
	clear(s.timers)
	s.mu.Unlock()
	s.pending.Wait()
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Order returns what the fake knows about an order.
func (s *Server) Order(orderID string) OrderState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orderState(orderID)
}

// Set does what POST /_fake/orders/{order_id} does.
func (s *Server) Set(ctx context.Context, orderID string, b Behaviour) error {
	switch b.Behaviour {
	case Instant, Late, Silent, Decline, Down, Slow, QR, PayOnClose:
	default:
		return fmt.Errorf("behaviour must be instant, late, silent, decline, down, slow, qr or pay_on_close, got %q", b.Behaviour)
	}
	if b.DelayMS < 0 {
		return fmt.Errorf("delay_ms must not be negative, got %d", b.DelayMS)
	}
	if b.NoneQueries < 0 {
		return fmt.Errorf("none_queries must not be negative, got %d", b.NoneQueries)
	}
	if b.PaidAt != nil && b.PaidAt.Err != nil {
		return b.PaidAt.Err
	}
	s.mu.Lock()
	o := s.order(orderID)
	o.behaviour = b.Behaviour
	o.delay = time.Duration(b.DelayMS) * time.Millisecond
	if b.PaymentID == "" || b.Behaviour == Down || b.Behaviour == Slow {
		s.mu.Unlock()
		return nil
	}
	o.paymentID, o.amount, o.currency, o.paidAt = b.PaymentID, b.Amount, b.Currency, b.PaidAt
	switch b.Behaviour {
	case Instant, Silent:
		o.status = gateway.StatusPaid
		s.ledger.paid(orderID, o)
	case QR:
		o.status = gateway.StatusPaid
		o.noneQueries = b.NoneQueries
		if o.noneQueries == 0 {
			s.ledger.paid(orderID, o) // scanned at once
		}
	case PayOnClose:
		o.status = gateway.StatusPending
	case Decline:
		o.status = gateway.StatusFailed
	case Late:
		s.schedule(o.delay, func() { s.completeLate(orderID) })
	}
	s.mu.Unlock()

	switch b.Behaviour {
	case Instant:
		return s.callback(ctx, orderID, b.PaymentID, b.Amount, b.Currency, true)
	case Decline:
		return s.callback(ctx, orderID, b.PaymentID, b.Amount, b.Currency, false)
	}
	return nil
}

// schedule runs f after d; s.mu is held.
func (s *Server) schedule(d time.Duration, f func()) {
	if s.closed {
		return
	}
	s.pending.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		delete(s.timers, t)
		s.mu.Unlock()
		defer s.pending.Done()
		f()
	})
	s.timers[t] = struct{}{}
}

// completeLate completes a late payment: the buyer pays now.
func (s *Server) completeLate(orderID string) {
	s.mu.Lock()
	o := s.order(orderID)
	if o.closed && o.status != gateway.StatusPaid {
		o.status = gateway.StatusFailed // the gateway refuses payment on a closed order
		s.mu.Unlock()
		s.Logger.Info("fake gateway: late payment refused, order closed", "order_id", orderID)
		return
	}
	o.status = gateway.StatusPaid
	s.ledger.paid(orderID, o)
	paymentID, amount, currency := o.paymentID, o.amount, o.currency
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callbackTimeout)
	defer cancel()
	_ = s.callback(ctx, orderID, paymentID, amount, currency, true)
}

// callback tells the shop (the database) about a payment, as a shop's
// callback handler would. A call the database asks to be made again
// (40001, 40P01) is made again, up to callbackTries times, as a gateway
// delivers a callback again after the shop's handler failed.
func (s *Server) callback(ctx context.Context, orderID, paymentID string, amount gateway.Amount, currency gateway.Currency, paid bool) error {
	if s.DB == nil {
		return nil
	}
	var (
		result string
		err    error
	)
	for try := 1; ; try++ {
		if paid {
			err = s.DB.QueryRow(ctx, "SELECT ordertimeout.confirm_payment($1, $2, $3::numeric, $4::text)",
				orderID, paymentID, amount.SQL(), currency.SQL()).Scan(&result)
		} else {
			err = s.DB.QueryRow(ctx, "SELECT ordertimeout.fail_payment($1, $2)", orderID, paymentID).Scan(&result)
		}
		if try == callbackTries || !sqlstate.Is(err, sqlstate.SerializationFailure, sqlstate.DeadlockDetected) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
	s.mu.Lock()
	s.stats.Callbacks++
	if err != nil {
		s.stats.CallbackErrors++
	}
	s.mu.Unlock()
	if err != nil {
		s.Logger.Warn("fake gateway: callback failed", "order_id", orderID, "payment_id", paymentID, "paid", paid, "error", err)
		return fmt.Errorf("callback for order %q: %w", orderID, err)
	}
	s.Logger.Info("fake gateway: callback", "order_id", orderID, "payment_id", paymentID, "paid", paid, "result", result)
	return nil
}

// order returns the order's record, creating it; s.mu is held.
func (s *Server) order(orderID string) *order {
	o, ok := s.orders[orderID]
	if !ok {
		o = &order{behaviour: Instant, status: gateway.StatusNone}
		s.orders[orderID] = o
	}
	return o
}

func (s *Server) orderState(orderID string) OrderState {
	o, ok := s.orders[orderID]
	if !ok {
		return OrderState{OrderID: orderID, Behaviour: Instant, Status: gateway.StatusNone}
	}
	return OrderState{
		OrderID:   orderID,
		Behaviour: o.behaviour,
		Status:    o.status,
		PaymentID: o.paymentID,
		Amount:    o.amount,
		Currency:  o.currency,
		PaidAt:    o.paidAt,
		Closed:    o.closed,
		Closes:    o.closes,
		Refunds:   o.refunds,
	}
}

// answer applies the down and slow behaviours of the gateway and of the
// order; it reports false when it has answered 503.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, orderID string) bool {
	s.mu.Lock()
	global := s.global
	var behaviour string
	var delay time.Duration
	if o, ok := s.orders[orderID]; ok && orderID != "" {
		behaviour, delay = o.behaviour, o.delay
	}
	s.mu.Unlock()
	if global.Behaviour == Down || behaviour == Down {
		http.Error(w, `{"error":"gateway down"}`, http.StatusServiceUnavailable)
		return false
	}
	wait := time.Duration(0)
	if global.Behaviour == Slow {
		wait = time.Duration(global.DelayMS) * time.Millisecond
	}
	if behaviour == Slow {
		wait = max(wait, delay)
	}
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return false
		}
	}
	return true
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	s.stats.Queries++
	s.mu.Unlock()
	if !s.answer(w, r, id) {
		return
	}
	s.mu.Lock()
	st := s.orderState(id)
	if o, ok := s.orders[id]; ok && o.noneQueries > 0 {
		o.noneQueries-- // the QR code is not scanned yet
		st.Status = gateway.StatusNone
		if o.noneQueries == 0 {
			s.ledger.paid(id, o) // scanned now: the next query finds it
		}
	}
	s.mu.Unlock()
	out := gateway.Order{OrderID: id, Status: st.Status}
	if st.Status == gateway.StatusPaid {
		out.PaymentID, out.Amount, out.Currency, out.PaidAt = st.PaymentID, st.Amount, st.Currency, st.PaidAt
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) closeOrder(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	s.stats.Closes++
	s.mu.Unlock()
	if !s.answer(w, r, id) {
		return
	}
	s.mu.Lock()
	o := s.order(id)
	o.closes++
	if o.behaviour == PayOnClose && !o.closed && o.paymentID != "" && o.status != gateway.StatusPaid {
		o.status = gateway.StatusPaid // ORDERPAID: the buyer was faster
		s.ledger.paid(id, o)
	}
	if o.noneQueries > 0 {
		// Closed before the QR code was scanned: it can no longer be paid.
		o.status, o.noneQueries = gateway.StatusFailed, 0
	}
	var out gateway.CloseResult
	if o.status == gateway.StatusPaid {
		out = gateway.CloseResult{Status: gateway.ClosePaid, PaymentID: o.paymentID, Amount: o.amount, Currency: o.currency, PaidAt: o.paidAt}
	} else {
		o.closed = true
		out = gateway.CloseResult{Status: gateway.CloseClosed}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	var req gateway.RefundRequest
	if err := decode(r, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.IdempotencyKey == "" || req.OrderID == "" || req.PaymentID == "" {
		http.Error(w, "order_id, payment_id and idempotency_key are required", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.stats.RefundRequests++
	s.mu.Unlock()
	if !s.answer(w, r, req.OrderID) {
		return
	}
	s.mu.Lock()
	out, ok := s.refunds[req.IdempotencyKey]
	if !ok {
		// What a gateway refuses: more than it holds of the payment (one
		// refunded already, by a person in its dashboard, say).
		if o, known := s.orders[req.OrderID]; known && o.paymentID == req.PaymentID {
			if why := o.overRefund(req.Amount); why != "" {
				s.mu.Unlock()
				http.Error(w, `{"error":"`+why+`"}`, http.StatusConflict)
				return
			}
		}
		s.stats.Refunds++
		out = gateway.Refund{RefundID: fmt.Sprintf("R%d", s.stats.Refunds), Status: "refunded"}
		s.refunds[req.IdempotencyKey] = out
		o := s.order(req.OrderID)
		o.refunds++
		s.ledger.refunded(req, o)
		o.giveBack(req.PaymentID, req.Amount)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) setOrder(w http.ResponseWriter, r *http.Request, id string) {
	var b Behaviour
	if err := decode(r, &b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.Set(r.Context(), id, b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.showOrder(w, r, id)
}

// Refund is the body of POST /_fake/orders/{order_id}/refund.
type Refund struct {
	// Amount is how much is given back; empty, all the gateway holds.
	Amount gateway.Amount `json:"amount,omitempty"`
}

// RefundOutside does what POST /_fake/orders/{order_id}/refund does: a person
// refunds the order's paid payment at the gateway (its dashboard), in full or
// by amount, without the shop's sidecar. GET /v1/payments lists the refund;
// GET /v1/orders/{order_id} then answers what the gateway still holds.
func (s *Server) RefundOutside(orderID string, amount gateway.Amount) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderID]
	if !ok || o.paymentID == "" {
		return fmt.Errorf("order %q has no paid payment to refund", orderID)
	}
	if why := o.overRefund(amount); why != "" {
		return fmt.Errorf("order %q: %s", orderID, why)
	}
	if amount != "" && o.amount == "" {
		return fmt.Errorf("order %q: payment %s has no amount to refund a part of", orderID, o.paymentID)
	}
	s.ledger.refunded(gateway.RefundRequest{OrderID: orderID, PaymentID: o.paymentID, Amount: amount}, o)
	o.refunds++
	o.giveBack(o.paymentID, amount)
	return nil
}

func (s *Server) refundOutside(w http.ResponseWriter, r *http.Request, id string) {
	var b Refund
	if err := decode(r, &b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.RefundOutside(id, b.Amount); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	s.showOrder(w, r, id)
}

// overRefund says why a refund of amount (all that is held when empty) of
// the order's payment is more than the gateway holds of it, or "". s.mu is
// held.
func (o *order) overRefund(amount gateway.Amount) string {
	if o.status != gateway.StatusPaid {
		return "payment " + o.paymentID + " holds nothing to refund (" + o.status + ")"
	}
	if amount == "" || o.amount == "" {
		return "" // all of it, or a payment set without an amount: taken whole
	}
	if rest, ok := subtract(o.amount, amount); !ok || rest.Sign() < 0 {
		return "refund of " + string(amount) + " is more than the " + string(o.amount) + " payment " + o.paymentID + " holds"
	}
	return ""
}

// giveBack records that payment paymentID of the order gave back amount (all
// of it when empty), as the contract has the gateway answer: refunded in
// full, the order's status is failed; in part, paid with the rest. A refund
// of another payment (one of a double payment) changes nothing here. s.mu is
// held.
func (o *order) giveBack(paymentID string, amount gateway.Amount) {
	if o.status != gateway.StatusPaid || paymentID != o.paymentID {
		return
	}
	if amount == "" || o.amount == "" {
		o.status = gateway.StatusFailed
		return
	}
	rest, ok := subtract(o.amount, amount)
	if !ok || rest.Sign() <= 0 {
		o.status = gateway.StatusFailed
		return
	}
	o.amount = gateway.Amount(rest.FloatString(max(scale(o.amount), scale(amount))))
}

// subtract returns a − b of two amounts of the contract's grammar.
func subtract(a, b gateway.Amount) (*big.Rat, bool) {
	x, okA := new(big.Rat).SetString(string(a))
	y, okB := new(big.Rat).SetString(string(b))
	if !okA || !okB {
		return nil, false
	}
	return x.Sub(x, y), true
}

// scale is the number of fraction digits of an amount.
func scale(a gateway.Amount) int {
	if _, frac, ok := strings.Cut(string(a), "."); ok {
		return len(frac)
	}
	return 0
}

func (s *Server) showOrder(w http.ResponseWriter, _ *http.Request, id string) {
	writeJSON(w, http.StatusOK, s.Order(id))
}

// SetGateway does what POST /_fake/gateway does.
func (s *Server) SetGateway(b Behaviour) error {
	switch b.Behaviour {
	case Normal, Down, Slow:
	default:
		return fmt.Errorf("behaviour must be normal, down or slow, got %q", b.Behaviour)
	}
	s.mu.Lock()
	s.global = Behaviour{Behaviour: b.Behaviour, DelayMS: b.DelayMS}
	s.mu.Unlock()
	return nil
}

func (s *Server) setGateway(w http.ResponseWriter, r *http.Request) {
	var b Behaviour
	if err := decode(r, &b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.SetGateway(b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) showStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
