package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// item is one entry of create_order's items.
type item struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// spec is the content of one order. It is drawn from the seed and the order's
// index only, so that a replay creates the same orders whatever the
// interleaving.
type spec struct {
	ID       string
	Items    []item
	Timeout  time.Duration
	Options  map[string]any
	Amount   string // options.amount, "" when there is none
	Currency string // options.currency, given with every amount
	Coupon   string
	Account  string
	Points   int64
	// PayAfter and CancelAfter: how long after its creation the buyer of
	// this order may confirm a payment or cancel (-1: never). Some orders
	// are paid around their deadline (racing their timeout), some long
	// after it (late payments), some cancelled by the buyer, the rest
	// abandoned; a few take anything at any time.
	PayAfter    time.Duration
	CancelAfter time.Duration
}

func newSpec(seed uint64, i int) spec {
	r := rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, uint64(i)))
	sp := spec{
		ID:      fmt.Sprintf("order-%05d", i),
		Timeout: time.Duration(50+r.IntN(451)) * time.Millisecond,
		Options: map[string]any{},
	}
	// One plentiful SKU, and sometimes scarce ones.
	sp.Items = append(sp.Items, item{SKU: []string{"sku-a", "sku-b"}[r.IntN(2)], Qty: int64(1 + r.IntN(3))})
	for _, scarce := range []struct {
		sku     string
		percent int
	}{{"sku-c", 35}, {"sku-d", 15}, {"sku-e", 6}} {
		if r.IntN(100) < scarce.percent {
			sp.Items = append(sp.Items, item{SKU: scarce.sku, Qty: int64(1 + r.IntN(3))})
		}
	}
	scaled := func(lo, hi float64) time.Duration {
		return time.Duration((lo + r.Float64()*(hi-lo)) * float64(sp.Timeout))
	}
	switch f := r.IntN(100); {
	case f < 10: // anything goes, any time
		sp.PayAfter, sp.CancelAfter = 0, 0
	case f < 45: // paid around its deadline
		sp.PayAfter, sp.CancelAfter = scaled(0.5, 1.3), -1
	case f < 60: // paid late
		sp.PayAfter, sp.CancelAfter = scaled(1.2, 3), -1
	case f < 75: // cancelled by the buyer
		sp.PayAfter, sp.CancelAfter = -1, scaled(0.2, 1.2)
	default: // abandoned
		sp.PayAfter, sp.CancelAfter = -1, -1
	}
	if r.IntN(5) == 0 {
		sp.Coupon = coupons[r.IntN(len(coupons))]
		sp.Options["coupon"] = sp.Coupon
	}
	if r.IntN(5) == 0 {
		sp.Account = []string{"acct-1", "acct-2", "acct-3"}[r.IntN(3)]
		sp.Points = int64(10 + r.IntN(111))
		sp.Options["points_account"] = sp.Account
		sp.Options["points"] = sp.Points
	}
	if r.IntN(10) < 3 {
		sp.Amount = fmt.Sprintf("%d.%02d", 1+r.IntN(200), r.IntN(100))
		sp.Currency = []string{"EUR", "EUR", "USD", "JPY"}[r.IntN(4)]
		sp.Options["amount"] = json.Number(sp.Amount)
		sp.Options["currency"] = sp.Currency
	}
	switch r.IntN(10) {
	case 0:
		sp.Options["precheck"] = "always"
	case 1:
		sp.Options["precheck"] = "never"
	}
	return sp
}

func (sp spec) itemsJSON() string   { return mustJSON(sp.Items) }
func (sp spec) optionsJSON() string { return mustJSON(sp.Options) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// order is what the model knows of one order.
type order struct {
	spec spec
	// returned is set once the first create_order call for it returned.
	returned bool
	// existsSince is when the first call that proved the order exists
	// returned; a call that started later must find it.
	existsSince time.Time
	// paidSince and cancelledSince: when the first call that proved the order
	// paid (or cancelled) returned. PAID is final; CANCELLED may only become
	// CLOSED or, through a reinstated conflict, PAID.
	paidSince      time.Time
	cancelledSince time.Time
	// payments known to exist: begun, or confirmed without a beginning.
	payments []string
}

// mayPay reports whether the buyer of o may confirm a payment at now.
func (m *model) mayPay(o *order, now time.Time) bool { return m.after(o, o.spec.PayAfter, now) }

// mayCancel reports whether the buyer of o may cancel it at now.
func (m *model) mayCancel(o *order, now time.Time) bool { return m.after(o, o.spec.CancelAfter, now) }

func (m *model) after(o *order, d time.Duration, now time.Time) bool {
	if d < 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return o.existsSince.IsZero() || now.Sub(o.existsSince) >= d
}

// call is one API call and its answer.
type call struct {
	Seq        int64
	Session    int
	Op         string
	Order      string
	Payment    string
	Arg        string // cancel's reason, resolve's resolution, confirm's amount, check's action, finish's refund id
	Currency   string // confirm: the payment's currency ("" for none: the order's)
	Conflict   int64
	Start, End time.Time
	Result     string // the answer, as text
	Created    bool   // create: the created column
	N          [5]int // sweep: claimed, cancelled, caught_by_sweep, checks, moot; close: closed
	Code       string // the SQLSTATE when the call failed
	Repeat     bool   // begin: a payment id begun before
	Wrong      bool   // confirm: the amount or the currency differs from the order's
	Poison     bool   // confirm, create: an amount or currency that must be refused (OT126, OT128, OT114)
	Fault      string // finish: "rollback" or "die" when its transaction never committed
	Alt        bool   // create: other content than the order's spec
	Lost       bool   // lose-timer: a timer row was deleted
	Unexpected string // why the answer breaks the model; "" when it does not
}

func (c *call) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d s%d %s", c.Seq, c.Session, c.Op)
	for _, f := range []struct{ k, v string }{{"order", c.Order}, {"payment", c.Payment}, {"arg", c.Arg},
		{"currency", c.Currency}, {"fault", c.Fault}} {
		if f.v != "" {
			fmt.Fprintf(&b, " %s=%q", f.k, f.v)
		}
	}
	if c.Conflict != 0 {
		fmt.Fprintf(&b, " conflict=%d", c.Conflict)
	}
	if c.Code != "" {
		fmt.Fprintf(&b, " -> error %s", c.Code)
	} else {
		fmt.Fprintf(&b, " -> %s", c.Result)
	}
	fmt.Fprintf(&b, " [%v..%v]", c.Start.Format("15:04:05.000000"), c.End.Format("15:04:05.000000"))
	return b.String()
}

// model is the reference model: every order's spec and what the calls
// answered.
type model struct {
	seed     uint64
	start    time.Time
	duration time.Duration
	orders   []*order
	byID     map[string]*order
	next     atomic.Int64 // index of the next order to create
	payments atomic.Int64
	seq      atomic.Int64

	mu       sync.Mutex
	returned []*order // orders whose first create returned, in that order
	calls    []*call
	// refunds is the payment gateway's ledger, as the sidecar's resolve
	// worker sees it: the refund id of every payment refunded, by the
	// idempotency key (the payment id). A key refunds once.
	refunds map[string]string
}

func newModel(seed uint64, orders int) *model {
	m := &model{seed: seed, duration: *durationFlag, byID: make(map[string]*order, orders), refunds: make(map[string]string)}
	for i := range orders {
		o := &order{spec: newSpec(seed, i)}
		m.orders = append(m.orders, o)
		m.byID[o.spec.ID] = o
	}
	return m
}

// dueCreate returns the index of the next order to create if creation is
// behind its schedule: the orders are created evenly over the first 70% of
// the run, so that their timeouts fire while the sessions run.
func (m *model) dueCreate(now time.Time) (int, bool) {
	target := int64(float64(len(m.orders))*float64(now.Sub(m.start))/(0.7*float64(m.duration))) + 1
	target = min(target, int64(len(m.orders)))
	for {
		i := m.next.Load()
		if i >= target {
			return 0, false
		}
		if m.next.CompareAndSwap(i, i+1) {
			return int(i), true
		}
	}
}

// pick returns an order whose creation was tried: mostly one of the latest,
// whose deadlines are near, sometimes any.
func (m *model) pick(r *rand.Rand) *order {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.returned)
	switch {
	case n == 0:
		return nil
	case r.IntN(4) > 0:
		return m.returned[n-1-r.IntN(min(n, 48))]
	default:
		return m.returned[r.IntN(n)]
	}
}

func (m *model) newPayment() string { return fmt.Sprintf("pay-%06d", m.payments.Add(1)) }

// unexpected returns the calls whose answers break the model.
func (m *model) unexpected() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, c := range m.calls {
		if c.Unexpected != "" {
			out = append(out, fmt.Sprintf("%s: %s", c, c.Unexpected))
		}
	}
	return out
}

// summary counts the calls by operation and answer.
func (m *model) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	count := make(map[string]int)
	for _, c := range m.calls {
		key := c.Op + ":"
		switch {
		case c.Code != "":
			key += c.Code
		case c.Op == "sweep":
			key += fmt.Sprintf("cancelled=%d", min(c.N[1], 1))
		case c.Op == "close" || c.Op == "preview":
			key += fmt.Sprintf("%d", min(c.N[0], 1))
		case c.Op == "create":
			key += fmt.Sprintf("created=%v", c.Created)
		default:
			key += c.Result
		}
		count[key]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

// session is one connection running random operations.
type session struct {
	m     *model
	id    int
	url   string // to connect again after the session's backend was made to die
	conn  *pgx.Conn
	conn2 *pgx.Conn // the second connection of closeRace, opened on first use
	rand  *rand.Rand
	last  *call // the session's latest recorded call (under m.mu)
}

// close closes the session's connections.
func (s *session) close() {
	s.conn.Close(context.Background())
	if s.conn2 != nil {
		s.conn2.Close(context.Background())
	}
}

// errSkip tells do that the operation had nothing to act on.
var errSkip = errors.New("nothing to do")

// do runs fn as call c and records it. An error that is not an SQL error (a
// broken connection, a cancelled context) ends the session. Two calls of one
// session may run at once (closeRace), each on a connection of its own.
func (s *session) do(c *call, fn func() error) error {
	c.Seq = s.m.seq.Add(1)
	c.Session = s.id
	c.Start = time.Now()
	err := fn()
	c.End = time.Now()
	if errors.Is(err, errSkip) {
		return nil
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return fmt.Errorf("%s: %w", c, err)
		}
		c.Code = pgErr.Code
		c.Result = pgErr.Message
	}
	s.m.mu.Lock()
	s.m.calls = append(s.m.calls, c)
	s.last = c
	s.m.mu.Unlock()
	return nil
}

// allow marks c unexpected if it failed with a code not in codes.
func allow(c *call, codes ...string) {
	if c.Code != "" && c.Unexpected == "" && !slices.Contains(codes, c.Code) {
		c.Unexpected = fmt.Sprintf("error %s (%s) is not an answer this call may give (allowed: %v)", c.Code, c.Result, codes)
	}
}

// unknownAllowed returns, for allow, OT120 (unknown order) when order o may
// not have existed yet when c started, else "" (no code).
func (s *session) unknownAllowed(o *order, c *call) string {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if o.existsSince.IsZero() || !o.existsSince.Before(c.Start) {
		return sqlstate.UnknownOrder
	}
	return ""
}

// run runs random operations until deadline.
func (s *session) run(ctx context.Context, deadline time.Time) error {
	for time.Now().Before(deadline) {
		if err := s.step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) step(ctx context.Context) error {
	if i, ok := s.m.dueCreate(time.Now()); ok {
		return s.create(ctx, s.m.orders[i], false)
	}
	if s.rand.IntN(300) == 0 {
		return s.checkInvariants(ctx)
	}
	// Work on no order in particular.
	switch w := s.rand.IntN(100); {
	case w < 20:
		return s.sweep(ctx, 1+s.rand.IntN(64))
	case w < 25:
		return s.resolve(ctx)
	case w < 27:
		return s.closeCancelled(ctx)
	case w < 32:
		_, err := s.check(ctx)
		return err
	case w < 33:
		return s.preview(ctx)
	case w < 34:
		return s.closeRace(ctx)
	case w < 37:
		return s.refundWorker(ctx)
	case w < 38:
		return s.finishOutOfTurn(ctx)
	case w < 39:
		return s.poisonCreate(ctx)
	}

	// Work on one order, as its buyer or the gateway would.
	o := s.m.pick(s.rand)
	if o == nil {
		time.Sleep(time.Millisecond)
		return nil
	}
	switch w := s.rand.IntN(100); {
	case w < 22:
		return s.begin(ctx, o)
	case w < 45 && s.m.mayPay(o, time.Now()):
		return s.confirm(ctx, o, "")
	case w >= 45 && w < 55:
		return s.fail(ctx, o, "")
	case w >= 55 && w < 68 && s.m.mayCancel(o, time.Now()):
		return s.cancel(ctx, o)
	case w >= 68 && w < 76:
		return s.extend(ctx, o)
	case w >= 76 && w < 83:
		return s.recreate(ctx, o)
	case w >= 83 && w < 85:
		return s.loseTimer(ctx, o)
	case w >= 85 && w < 89:
		return s.poisonConfirm(ctx, o)
	default:
		return s.info(ctx, o)
	}
}

func (s *session) create(ctx context.Context, o *order, alt bool) error {
	sp := o.spec
	timeout := sp.Timeout
	if alt {
		timeout += 7 * time.Millisecond
	}
	c := &call{Op: "create", Order: sp.ID, Alt: alt}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx,
			`SELECT created, status FROM ordertimeout.create_order($1, $2::jsonb, $3, $4::jsonb)`,
			sp.ID, sp.itemsJSON(), timeout, sp.optionsJSON()).Scan(&c.Created, &c.Result)
	})
	if err != nil {
		return err
	}
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	existed := !o.existsSince.IsZero() && o.existsSince.Before(c.Start)
	switch {
	case alt:
		// Only sent for an order known to exist.
		if c.Code != sqlstate.OrderIDConflict {
			c.Unexpected = "the same id with other content must raise " + sqlstate.OrderIDConflict
		}
	case existed:
		allow(c)
		if c.Code == "" && c.Created {
			c.Unexpected = "created an order that already existed"
		}
	default:
		allow(c, sqlstate.InsufficientStock, sqlstate.CouponHeld, sqlstate.InsufficientPoints)
		if c.Code == "" && c.Created && c.Result != "PENDING" {
			c.Unexpected = "a new order must be PENDING"
		}
	}
	if c.Code == "" && o.existsSince.IsZero() {
		o.existsSince = c.End
	}
	if !o.returned {
		o.returned = true
		m.returned = append(m.returned, o)
	}
	return nil
}

// recreate calls create_order again for an order: with its own content (an
// idempotent repeat, or a new try after running out of stock), or with other
// content, which must be refused.
func (s *session) recreate(ctx context.Context, o *order) error {
	s.m.mu.Lock()
	exists := !o.existsSince.IsZero()
	s.m.mu.Unlock()
	return s.create(ctx, o, exists && s.rand.IntN(10) < 3)
}

func (s *session) begin(ctx context.Context, o *order) error {
	s.m.mu.Lock()
	known := slices.Clone(o.payments)
	s.m.mu.Unlock()
	c := &call{Op: "begin", Order: o.spec.ID}
	if len(known) > 0 && s.rand.IntN(10) == 0 {
		c.Payment, c.Repeat = known[s.rand.IntN(len(known))], true
	} else {
		c.Payment = s.m.newPayment()
	}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx, `SELECT status FROM ordertimeout.begin_payment($1, $2)`,
			o.spec.ID, c.Payment).Scan(&c.Result)
	})
	if err != nil {
		return err
	}
	if c.Repeat {
		allow(c, sqlstate.WrongStatus)
	} else {
		allow(c, sqlstate.OrderExpired, sqlstate.WrongStatus, s.unknownAllowed(o, c))
	}
	if c.Code == "" {
		if c.Result != "PAYING" {
			c.Unexpected = "a begun payment leaves the order PAYING"
		}
		if !c.Repeat {
			s.m.mu.Lock()
			o.payments = append(o.payments, c.Payment)
			s.m.mu.Unlock()
		}
	}
	return nil
}

// confirm confirms a payment of o: payment if given, else one of its known
// payments or a new one (the gateway's callback for a payment never begun).
func (s *session) confirm(ctx context.Context, o *order, payment string) error {
	s.m.mu.Lock()
	known := slices.Clone(o.payments)
	s.m.mu.Unlock()
	c := &call{Op: "confirm", Order: o.spec.ID, Payment: payment}
	fresh := false
	if c.Payment == "" {
		if len(known) == 0 || s.rand.IntN(10) < 4 {
			c.Payment, fresh = s.m.newPayment(), true
		} else {
			c.Payment = known[s.rand.IntN(len(known))]
		}
	}
	s.money(c, o.spec, payment == "")
	if err := s.do(c, func() error { return confirmOn(ctx, s.conn, o, c) }); err != nil {
		return err
	}
	s.judgeConfirm(o, c, fresh)
	return nil
}

// confirmOn runs confirmation c of order o on conn.
func confirmOn(ctx context.Context, conn *pgx.Conn, o *order, c *call) error {
	return conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, $3::numeric, $4)`,
		o.spec.ID, c.Payment, nullable(c.Arg), nullable(c.Currency)).Scan(&c.Result)
}

// judgeConfirm judges the answer of confirmation c of o and records what it
// proves; fresh says its payment id is new.
func (s *session) judgeConfirm(o *order, c *call, fresh bool) {
	codes := []string{s.unknownAllowed(o, c)}
	if !fresh {
		// A known payment, confirmed before with other money (verify
		// checks that it was).
		codes = append(codes, sqlstate.OtherMoneyForPayment)
	}
	allow(c, codes...)
	if c.Code != "" {
		return
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	switch c.Result {
	case "paid":
		if o.paidSince.IsZero() {
			o.paidSince = c.End
		}
	case "conflict":
	default:
		c.Unexpected = "confirm_payment answers paid or conflict"
	}
	if fresh {
		o.payments = append(o.payments, c.Payment)
	}
}

func (s *session) fail(ctx context.Context, o *order, payment string) error {
	if payment == "" {
		s.m.mu.Lock()
		known := slices.Clone(o.payments)
		s.m.mu.Unlock()
		if len(known) == 0 {
			return s.info(ctx, o)
		}
		payment = known[s.rand.IntN(len(known))]
	}
	c := &call{Op: "fail", Order: o.spec.ID, Payment: payment}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx, `SELECT ordertimeout.fail_payment($1, $2)`, o.spec.ID, payment).Scan(&c.Result)
	})
	if err != nil {
		return err
	}
	allow(c)
	if c.Code == "" && !slices.Contains([]string{"pending", "paying", "ignored"}, c.Result) {
		c.Unexpected = "fail_payment answers pending, paying or ignored"
	}
	return nil
}

func (s *session) cancel(ctx context.Context, o *order) error {
	c := &call{Op: "cancel", Order: o.spec.ID}
	err := s.do(c, func() error {
		c.Arg = fmt.Sprintf("model cancel %d", c.Seq)
		var cancelled bool
		err := s.conn.QueryRow(ctx, `SELECT ordertimeout.cancel_order($1, $2)`, o.spec.ID, c.Arg).Scan(&cancelled)
		c.Result = fmt.Sprint(cancelled)
		return err
	})
	if err != nil {
		return err
	}
	allow(c, s.unknownAllowed(o, c))
	if c.Code == "" && c.Result == "true" {
		s.m.mu.Lock()
		if !o.paidSince.IsZero() && o.paidSince.Before(c.Start) {
			c.Unexpected = "cancelled an order that was paid before"
		}
		if o.cancelledSince.IsZero() {
			o.cancelledSince = c.End
		}
		s.m.mu.Unlock()
	}
	return nil
}

func (s *session) extend(ctx context.Context, o *order) error {
	by := time.Duration(50+s.rand.IntN(251)) * time.Millisecond
	c := &call{Op: "extend", Order: o.spec.ID, Arg: by.String()}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx, `SELECT status FROM ordertimeout.extend_deadline($1, $2)`, o.spec.ID, by).Scan(&c.Result)
	})
	if err != nil {
		return err
	}
	allow(c, sqlstate.WrongStatus, s.unknownAllowed(o, c))
	if c.Code == "" && c.Result != "PENDING" {
		c.Unexpected = "only a PENDING order is given more time"
	}
	return nil
}

func (s *session) sweep(ctx context.Context, max int) error {
	c := &call{Op: "sweep", Arg: fmt.Sprint(max)}
	err := s.do(c, func() error {
		err := s.conn.QueryRow(ctx,
			`SELECT claimed, cancelled, caught_by_sweep, checks, moot FROM ordertimeout.sweep_due($1)`, max).
			Scan(&c.N[0], &c.N[1], &c.N[2], &c.N[3], &c.N[4])
		c.Result = fmt.Sprintf("claimed %d cancelled %d caught %d checks %d moot %d", c.N[0], c.N[1], c.N[2], c.N[3], c.N[4])
		return err
	})
	if err != nil {
		return err
	}
	allow(c)
	if c.Code == "" && (c.N[0] > max || c.N[1]+c.N[4] > c.N[0] || c.N[2] > c.N[0]) {
		c.Unexpected = "sweep_due's counts do not add up"
	}
	return nil
}

// answersOf lists, per resolution, what resolve_conflict may answer: a refund
// is claimed (refunding) until the sidecar records it (refunded).
var answersOf = map[string][]string{
	"reinstate": {"reinstated"},
	"refund":    {"refunding", "refunded"},
	"manual":    {"manual"},
}

// outcomeOf is the resolution a conflict ends in after resolve_conflict
// answered answer.
func outcomeOf(answer string) string {
	if answer == "refunding" {
		return "refunded"
	}
	return answer
}

// resolve resolves a conflict as an admin would, mostly an open one,
// sometimes any (a repeat, a second opinion, or one being refunded).
func (s *session) resolve(ctx context.Context) error {
	query := `SELECT c.conflict_id, c.order_id FROM ordertimeout.conflicts AS c WHERE c.resolution IS NULL ORDER BY c.conflict_id LIMIT 50`
	if s.rand.IntN(5) == 0 {
		query = `SELECT c.conflict_id, c.order_id FROM ordertimeout.conflicts AS c ORDER BY c.conflict_id DESC LIMIT 50`
	}
	rows, err := s.conn.Query(ctx, query)
	if err != nil {
		return fmt.Errorf("list conflicts: %w", err)
	}
	type conflict struct {
		ID    int64
		Order string
	}
	open, err := pgx.CollectRows(rows, pgx.RowToStructByPos[conflict])
	if err != nil {
		return fmt.Errorf("list conflicts: %w", err)
	}
	if len(open) == 0 {
		return s.sweep(ctx, 16)
	}
	pick := open[s.rand.IntN(len(open))]
	c := &call{Op: "resolve", Order: pick.Order, Conflict: pick.ID}
	switch r := s.rand.IntN(20); {
	case r < 10:
		c.Arg = "reinstate"
	case r < 17:
		c.Arg = "refund"
	default:
		c.Arg = "manual"
	}
	err = s.do(c, func() error {
		return s.conn.QueryRow(ctx, `SELECT ordertimeout.resolve_conflict($1, $2)`, c.Conflict, c.Arg).Scan(&c.Result)
	})
	if err != nil {
		return err
	}
	switch c.Arg {
	case "reinstate":
		allow(c, sqlstate.CannotReinstate, sqlstate.ConflictResolved, sqlstate.ConflictRefunding)
	default:
		allow(c, sqlstate.ConflictResolved, sqlstate.ConflictRefunding)
	}
	if c.Code != "" {
		return nil
	}
	if !slices.Contains(answersOf[c.Arg], c.Result) {
		c.Unexpected = fmt.Sprintf("resolve_conflict(%s) answers %v", c.Arg, answersOf[c.Arg])
	}
	if c.Result == "reinstated" {
		s.m.mu.Lock()
		if o := s.m.byID[c.Order]; o != nil && o.paidSince.IsZero() {
			o.paidSince = c.End
		}
		s.m.mu.Unlock()
	}
	return nil
}

func (s *session) closeCancelled(ctx context.Context) error {
	older := time.Duration(s.rand.IntN(300)) * time.Millisecond
	c := closeCall(older, 1+s.rand.IntN(20))
	if err := s.do(c, func() error { return closeOn(ctx, s.conn, c) }); err != nil {
		return err
	}
	judgeClose(c)
	return nil
}

// closeCall is a close_cancelled call; N[1] holds its max, N[2] its
// older_than in milliseconds.
func closeCall(older time.Duration, max int) *call {
	return &call{Op: "close", Arg: fmt.Sprintf("older than %v, max %d", older, max), N: [5]int{0, max, int(older.Milliseconds())}}
}

// closeOn runs close_cancelled call c on conn.
func closeOn(ctx context.Context, conn *pgx.Conn, c *call) error {
	older := time.Duration(c.N[2]) * time.Millisecond
	err := conn.QueryRow(ctx, `SELECT ordertimeout.close_cancelled($1, $2)`, older, c.N[1]).Scan(&c.N[0])
	c.Result = fmt.Sprint(c.N[0])
	return err
}

func judgeClose(c *call) {
	allow(c)
	if c.Code == "" && c.N[0] > c.N[1] {
		c.Unexpected = "closed more than max"
	}
}

// closeRace confirms a late payment of a recently cancelled order, on the
// session's second connection, against close_cancelled closing every
// cancelled order without an open conflict: both let go at once, or the
// close in a REPEATABLE READ transaction whose snapshot was taken before the
// payment committed (then it may fail with 40001). The order must end
// CANCELLED with its conflict, or CLOSED without one, never CLOSED with an
// open conflict.
func (s *session) closeRace(ctx context.Context) error {
	o := s.m.cancelledRecently(s.rand)
	if o == nil {
		return s.closeCancelled(ctx)
	}
	if s.conn2 == nil {
		conn, err := connect(ctx, s.url, s.id)
		if err != nil {
			return err
		}
		s.conn2 = conn
	}
	pay := &call{Op: "confirm", Order: o.spec.ID, Payment: s.m.newPayment()}
	s.money(pay, o.spec, true)
	cl := closeCall(0, 1000)
	if s.rand.IntN(2) == 0 {
		return s.closeAfterSnapshot(ctx, o, pay, cl)
	}
	start := make(chan struct{})
	var errPay, errClose error
	var wg sync.WaitGroup
	wg.Go(func() {
		<-start
		errPay = s.do(pay, func() error { return confirmOn(ctx, s.conn2, o, pay) })
	})
	wg.Go(func() {
		<-start
		errClose = s.do(cl, func() error { return closeOn(ctx, s.conn, cl) })
	})
	close(start)
	wg.Wait()
	if err := errors.Join(errPay, errClose); err != nil {
		return err
	}
	s.judgeConfirm(o, pay, true)
	judgeClose(cl)
	return s.closedSettled(ctx, o, pay)
}

// checkInvariants checks the invariants of package invariant while the
// sessions run: each is one statement, one snapshot, and must hold in every
// one of them, not only after the drain.
func (s *session) checkInvariants(ctx context.Context) error {
	c := &call{Op: "invariants"}
	var report invariant.Report
	if err := s.do(c, func() error {
		var err error
		report, err = invariant.Check(ctx, s.conn, invariant.Options{})
		c.Result = map[bool]string{true: "ok", false: "violated"}[report.OK()]
		return err
	}); err != nil {
		return err
	}
	allow(c)
	if c.Code == "" && !report.OK() {
		s.m.mu.Lock()
		c.Unexpected = "invariants:\n" + report.String()
		s.m.mu.Unlock()
	}
	return nil
}

// closedSettled looks, right after a closeRace, whether the order is CLOSED
// with the conflict of the payment still unresolved: a state no moment may
// show (a later late payment would reopen the order and hide it from the
// checks after the drain).
func (s *session) closedSettled(ctx context.Context, o *order, pay *call) error {
	if pay.Code != "" || pay.Result != "conflict" {
		return nil
	}
	var conflictID *int64
	err := s.conn.QueryRow(ctx, `
SELECT c.conflict_id
FROM ordertimeout.orders AS o
JOIN ordertimeout.conflicts AS c ON c.order_id = o.order_id
WHERE o.order_id = $1
  AND o.status = 'CLOSED'
  AND c.payment_id = $2
  AND c.resolution IS NULL`, o.spec.ID, pay.Payment).Scan(&conflictID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read the raced order: %w", err)
	}
	s.m.mu.Lock()
	pay.Unexpected = fmt.Sprintf("after the race the order is CLOSED with conflict %d open", *conflictID)
	s.m.mu.Unlock()
	return nil
}

// closeAfterSnapshot is closeRace's REPEATABLE READ interleaving, in a fixed
// order: snapshot, payment committed, close.
func (s *session) closeAfterSnapshot(ctx context.Context, o *order, pay, cl *call) error {
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return fmt.Errorf("begin close: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM ordertimeout.orders`); err != nil {
		return fmt.Errorf("take the close's snapshot: %w", err)
	}
	if err := s.do(pay, func() error { return confirmOn(ctx, s.conn2, o, pay) }); err != nil {
		return err
	}
	s.judgeConfirm(o, pay, true)
	cl.Arg += ", repeatable read"
	if err := s.do(cl, func() error {
		if err := closeOn(ctx, tx.Conn(), cl); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}); err != nil {
		return err
	}
	if cl.Code != sqlstate.SerializationFailure {
		judgeClose(cl)
	}
	_ = tx.Rollback(ctx) // after a failed close; nothing to roll back after its commit
	return s.closedSettled(ctx, o, pay)
}

// check plays the sidecar's gateway check before a cancel: it takes one
// ordertimeout_precancel_check job and, in the same transaction, either
// confirms a payment of the order (the gateway says it was paid) or cancels it
// with cancel_checked at the version the job was made for. It reports whether
// there was a job.
func (s *session) check(ctx context.Context) (bool, error) {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin check: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var orderID string
	var version int
	err = tx.QueryRow(ctx, `
DELETE FROM public.river_job AS r
WHERE r.id = (SELECT j.id
                FROM public.river_job AS j
               WHERE j.kind = 'ordertimeout_precancel_check'
               ORDER BY j.id
               LIMIT 1
                 FOR UPDATE SKIP LOCKED)
RETURNING r.args ->> 'order_id', (r.args ->> 'version')::integer`).Scan(&orderID, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take a check job: %w", err)
	}
	o := s.m.byID[orderID]
	if o == nil {
		return false, fmt.Errorf("check job for order %q, which the model does not know", orderID)
	}
	s.m.mu.Lock()
	known := slices.Clone(o.payments)
	s.m.mu.Unlock()
	c := &call{Op: "check", Order: orderID}
	if len(known) > 0 && s.rand.IntN(4) == 0 {
		c.Arg, c.Payment = "confirm", known[len(known)-1]
	} else {
		c.Arg = fmt.Sprintf("cancel version %d", version)
	}
	err = s.do(c, func() error {
		if c.Payment != "" {
			// The gateway's answer: the order's amount, in its currency.
			if err := tx.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, $3::numeric, $4)`,
				orderID, c.Payment, nullable(o.spec.Amount), nullable(o.spec.Currency)).Scan(&c.Result); err != nil {
				return err
			}
		} else {
			var cancelled bool
			if err := tx.QueryRow(ctx, `SELECT ordertimeout.cancel_checked($1, $2)`, orderID, version).Scan(&cancelled); err != nil {
				return err
			}
			c.Result = fmt.Sprint(cancelled)
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return true, err
	}
	if c.Payment != "" {
		// The payment was confirmed before with other money (verify checks
		// that it was).
		allow(c, sqlstate.OtherMoneyForPayment)
	} else {
		allow(c)
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	switch {
	case c.Code != "":
	case c.Result == "paid" && o.paidSince.IsZero():
		o.paidSince = c.End
	case c.Result == "true" && o.cancelledSince.IsZero():
		o.cancelledSince = c.End
	}
	return true, nil
}

// loseTimer deletes the timer row of an order, as a crash of a careless
// process might: the sweep's fallback must still cancel the order on time.
func (s *session) loseTimer(ctx context.Context, o *order) error {
	c := &call{Op: "lose-timer", Order: o.spec.ID}
	err := s.do(c, func() error {
		tag, err := s.conn.Exec(ctx, `
DELETE FROM public.river_job AS r
USING ordertimeout.orders AS o
WHERE o.order_id = $1
  AND r.id = o.timer_job_id
  AND r.queue = $2`, o.spec.ID, timer.Name)
		c.Lost = tag.RowsAffected() > 0
		c.Result = fmt.Sprint(c.Lost)
		return err
	})
	if err != nil {
		return err
	}
	allow(c)
	return nil
}

func (s *session) info(ctx context.Context, o *order) error {
	c := &call{Op: "info", Order: o.spec.ID}
	err := s.do(c, func() error {
		return s.conn.QueryRow(ctx, `SELECT status FROM ordertimeout.order_info($1)`, o.spec.ID).Scan(&c.Result)
	})
	if err != nil {
		return err
	}
	allow(c, s.unknownAllowed(o, c))
	if c.Code != "" {
		return nil
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	switch {
	case !o.paidSince.IsZero() && o.paidSince.Before(c.Start) && c.Result != "PAID":
		c.Unexpected = fmt.Sprintf("the order was paid at %v", o.paidSince.Format("15:04:05.000000"))
	case !o.cancelledSince.IsZero() && o.cancelledSince.Before(c.Start) && (c.Result == "PENDING" || c.Result == "PAYING"):
		c.Unexpected = fmt.Sprintf("the order was cancelled at %v", o.cancelledSince.Format("15:04:05.000000"))
	}
	switch c.Result {
	case "PAID":
		if o.paidSince.IsZero() {
			o.paidSince = c.End
		}
	case "CANCELLED", "CLOSED":
		if o.cancelledSince.IsZero() {
			o.cancelledSince = c.End
		}
	}
	return nil
}

func (s *session) preview(ctx context.Context) error {
	c := &call{Op: "preview"}
	err := s.do(c, func() error {
		err := s.conn.QueryRow(ctx, `SELECT count(*) FROM ordertimeout.preview_due(20)`).Scan(&c.N[0])
		c.Result = fmt.Sprint(c.N[0])
		return err
	})
	if err != nil {
		return err
	}
	allow(c)
	return nil
}

// drain ends the run: the gateway answers every payment still in flight
// (confirmed or failed), then the sweep and the gateway checks run until no
// order is left PENDING or PAYING.
func (s *session) drain(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		rows, err := s.conn.Query(ctx, `
SELECT p.order_id, p.payment_id
FROM ordertimeout.payments AS p
JOIN ordertimeout.orders AS o ON o.order_id = p.order_id
WHERE o.status = 'PAYING'
  AND p.status = 'started'
ORDER BY p.payment_id`)
		if err != nil {
			return fmt.Errorf("list payments in flight: %w", err)
		}
		type inFlight struct{ Order, Payment string }
		flying, err := pgx.CollectRows(rows, pgx.RowToStructByPos[inFlight])
		if err != nil {
			return fmt.Errorf("list payments in flight: %w", err)
		}
		for _, p := range flying {
			o := s.m.byID[p.Order]
			if s.rand.IntN(2) == 0 {
				err = s.confirm(ctx, o, p.Payment)
			} else {
				err = s.fail(ctx, o, p.Payment)
			}
			if err != nil {
				return err
			}
		}
		for {
			if err := s.sweep(ctx, 1000); err != nil {
				return err
			}
			if s.last.Code != "" || s.last.N[0] == 0 {
				break
			}
		}
		for {
			found, err := s.check(ctx)
			if err != nil {
				return err
			}
			if !found {
				break
			}
		}

		var live int
		var next *time.Time
		if err := s.conn.QueryRow(ctx, `
SELECT count(*), min(o.cancel_at) FILTER (WHERE o.status = 'PENDING')
FROM ordertimeout.orders AS o
WHERE o.status IN ('PENDING', 'PAYING')`).Scan(&live, &next); err != nil {
			return fmt.Errorf("count live orders: %w", err)
		}
		if live == 0 {
			return s.drainRefunds(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d orders still PENDING or PAYING after a minute of draining (earliest cancel_at %v)", live, next)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cancelledRecently returns one of the orders most recently seen cancelled
// and never paid, or nil.
func (m *model) cancelledRecently(r *rand.Rand) *order {
	m.mu.Lock()
	defer m.mu.Unlock()
	var found []*order
	for i := len(m.returned) - 1; i >= 0 && len(found) < 8; i-- {
		if o := m.returned[i]; !o.cancelledSince.IsZero() && o.paidSince.IsZero() {
			found = append(found, o)
		}
	}
	if len(found) == 0 {
		return nil
	}
	return found[r.IntN(len(found))]
}
