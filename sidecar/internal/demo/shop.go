package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// timing is the demo's clock: every deadline is a fraction of the run, so a
// 15 second run tells the same stories as a one minute run, faster.
type timing struct {
	timeout      time.Duration // default_timeout: how long a buyer has to pay
	grace        time.Duration // cancel_at = expire_at + grace
	payingWindow time.Duration // how long a started payment may take before the gateway is asked
	produceFor   time.Duration // how long new orders keep coming
}

// newTiming derives the deadlines from the run's length: for one minute, a 20
// second timeout, 2 seconds of grace and an 8 second paying window; orders
// keep coming until there is just time left for the last ones to expire.
func newTiming(d time.Duration) timing {
	t := timing{
		timeout:      d / 3,
		grace:        d / 30,
		payingWindow: d * 2 / 15,
	}
	t.produceFor = d - t.timeout - t.grace - max(3*time.Second, d/12)
	return t
}

// product is one SKU of the shop's catalogue.
type product struct {
	sku   string
	cents int64 // price
	stock int64 // units put with put_stock for a one minute run
}

// catalogue is what the shop sells. Quantities are small, so that stock is
// visibly reserved, sold and given back.
var catalogue = []product{
	{"tee-black", 1990, 40},
	{"tee-white", 1990, 40},
	{"mug", 1250, 30},
	{"poster", 900, 25},
	{"stickers", 350, 60},
}

// vinyl is the limited edition: one unit, which the late-payment-sold-out
// story sells twice over.
var vinyl = product{"vinyl-limited", 3500, 1}

// pointsAccounts are the loyalty accounts and their balances.
var pointsAccounts = []struct {
	id      string
	balance int64
}{
	{"alice", 600},
	{"bob", 400},
	{"carol", 250},
}

// item is one line of an order, as create_order takes it.
type item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// order is what the shop knows about an order it placed.
type order struct {
	id       string
	amount   gateway.Amount
	created  time.Time
	expireAt time.Time
	cancelAt time.Time
}

// shop is the demo's web shop: it places orders and plays the buyers, who
// pay, pay late, pay silently, have their card declined or walk away. It
// talks to the database through the ordertimeout API and to the fake payment
// gateway through its control API, as the buyer's browser would.
type shop struct {
	db     *pgxpool.Pool
	gw     *sidecarproc.Fake
	timing timing
	rate   float64 // background orders per second
	scale  int64   // stock multiplier for runs longer than a minute

	buyers sync.WaitGroup

	mu       sync.Mutex
	placed   int      // background orders placed
	refused  int      // background orders refused for lack of stock
	problems []string // unexpected errors, shown in the report
}

// stockTotals returns every SKU and the units put for it: what invariant
// checks that available + reserved + sold still adds up to.
func (s *shop) stockTotals() map[string]int64 {
	totals := map[string]int64{vinyl.sku: vinyl.stock}
	for _, p := range catalogue {
		totals[p.sku] = p.stock * s.scale
	}
	return totals
}

// setup configures short deadlines for the demo and fills the shelves.
func (s *shop) setup(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `
SELECT ordertimeout.configure(
    default_timeout => $1,
    grace           => $2,
    paying_window   => $3,
    precheck        => 'attempted',
    late_payment    => 'reinstate',
    webhooks        => false)`,
		s.timing.timeout, s.timing.grace, s.timing.payingWindow)
	if err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	for sku, total := range s.stockTotals() {
		if _, err := s.db.Exec(ctx, "SELECT ordertimeout.put_stock($1, $2)", sku, total); err != nil {
			return fmt.Errorf("put stock %s: %w", sku, err)
		}
	}
	for _, a := range pointsAccounts {
		if _, err := s.db.Exec(ctx, "SELECT ordertimeout.put_points($1, $2)", a.id, a.balance*s.scale); err != nil {
			return fmt.Errorf("put points %s: %w", a.id, err)
		}
	}
	return nil
}

// run plays the stories and places background orders for timing.produceFor,
// then waits for every buyer to be done. It returns early only when ctx ends.
func (s *shop) run(ctx context.Context, stories []*story) error {
	for i, st := range stories {
		s.buyers.Go(func() {
			if !sleep(ctx, time.Duration(i)*300*time.Millisecond) {
				return
			}
			if err := st.play(ctx, s); err != nil && ctx.Err() == nil {
				s.problem("story %s: %v", st.id, err)
			}
		})
	}

	// Background traffic: a few orders a second, at random moments.
	rng := rand.New(rand.NewPCG(1, 2)) // the same shop every run
	stop := time.Now().Add(s.timing.produceFor)
	for n := 1; time.Now().Before(stop); n++ {
		gap := time.Duration(rng.ExpFloat64() / s.rate * float64(time.Second))
		if !sleep(ctx, min(gap, 2*time.Second)) {
			break
		}
		s.placeBackground(ctx, n, rng)
	}
	s.buyers.Wait()
	return ctx.Err()
}

// behaviour is what a background buyer does with an order.
type behaviour int

const (
	pays     behaviour = iota // pays in time; the gateway calls back at once
	abandons                  // never pays
	declined                  // the card is declined, then the buyer gives up
	silent                    // pays, but the gateway never calls back
)

// pickBehaviour draws what a background buyer does: most pay, many walk
// away, a few have their card declined or pay without a callback.
func pickBehaviour(rng *rand.Rand) behaviour {
	switch r := rng.IntN(100); {
	case r < 60:
		return pays
	case r < 88:
		return abandons
	case r < 94:
		return declined
	default:
		return silent
	}
}

// placeBackground places background order n: one or two SKUs, sometimes with
// a coupon or loyalty points, and starts its buyer.
func (s *shop) placeBackground(ctx context.Context, n int, rng *rand.Rand) {
	id := fmt.Sprintf("order-%04d", n)
	var items []item
	for _, i := range rng.Perm(len(catalogue))[:1+rng.IntN(2)] {
		items = append(items, item{SKU: catalogue[i].sku, Qty: 1 + rng.IntN(2)})
	}
	var coupon, account string
	var points int64
	if rng.IntN(4) == 0 {
		coupon = fmt.Sprintf("SAVE5-%04d", n)
	}
	if rng.IntN(4) == 0 {
		account = pointsAccounts[rng.IntN(len(pointsAccounts))].id
		points = 10 * int64(2+rng.IntN(8))
	}
	b := pickBehaviour(rng)
	payAfter := time.Duration((0.1 + 0.6*rng.Float64()) * float64(s.timing.timeout))

	o, err := s.create(ctx, id, items, coupon, account, points)
	if sqlstate.Is(err, sqlstate.InsufficientPoints) { // not enough free points: the buyer pays without them
		o, err = s.create(ctx, id, items, coupon, "", 0)
	}
	switch {
	case sqlstate.Is(err, sqlstate.InsufficientStock):
		s.count(&s.refused)
		return
	case err != nil:
		if ctx.Err() == nil {
			s.problem("%v", err)
		}
		return
	}
	s.count(&s.placed)
	if b == abandons {
		return
	}
	s.buyers.Go(func() {
		if !sleep(ctx, payAfter) {
			return
		}
		var err error
		switch b {
		case pays:
			err = s.pay(ctx, o, fakegateway.Instant)
		case declined:
			err = s.pay(ctx, o, fakegateway.Decline)
		case silent:
			err = s.pay(ctx, o, fakegateway.Silent)
		}
		if err != nil && ctx.Err() == nil {
			s.problem("%s: %v", o.id, err)
		}
	})
}

// create places an order. The amount is the sum of the items' prices.
func (s *shop) create(ctx context.Context, id string, items []item, coupon, account string, points int64) (order, error) {
	var cents int64
	for _, it := range items {
		cents += int64(it.Qty) * price(it.SKU)
	}
	o := order{id: id, amount: gateway.Amount(fmt.Sprintf("%d.%02d", cents/100, cents%100))}
	options := map[string]any{"amount": json.Number(o.amount), "currency": "EUR"}
	if coupon != "" {
		options["coupon"] = coupon
	}
	if account != "" {
		options["points_account"], options["points"] = account, points
	}
	itemsJSON, err := json.Marshal(items)
	if err != nil {
		return order{}, err
	}
	optionsJSON, err := json.Marshal(options)
	if err != nil {
		return order{}, err
	}
	err = s.db.QueryRow(ctx, `
SELECT created_at, expire_at, cancel_at
FROM ordertimeout.create_order(order_id => $1, items => $2, options => $3)`,
		id, itemsJSON, optionsJSON).Scan(&o.created, &o.expireAt, &o.cancelAt)
	if err != nil {
		return order{}, fmt.Errorf("create order %s: %w", id, err)
	}
	return o, nil
}

// pay is the buyer paying: the shop calls begin_payment before sending the
// buyer to the gateway, then the gateway does what behaviour says (and, for
// instant and decline, calls the shop back).
func (s *shop) pay(ctx context.Context, o order, behaviour string) error {
	paymentID := "pay-" + o.id
	if _, err := s.db.Exec(ctx, "SELECT ordertimeout.begin_payment($1, $2)", o.id, paymentID); err != nil {
		return fmt.Errorf("begin payment: %w", err)
	}
	return s.gw.SetOrder(ctx, o.id, fakegateway.Behaviour{Behaviour: behaviour, PaymentID: paymentID, Amount: o.amount})
}

// payLate is a bank transfer that lands at the gateway at the given moment,
// after the order's deadline. It never went through begin_payment: the shop
// learns of it only from the gateway's callback.
func (s *shop) payLate(ctx context.Context, o order, at time.Time) error {
	return s.gw.SetOrder(ctx, o.id, fakegateway.Behaviour{
		Behaviour: fakegateway.Late,
		DelayMS:   int(time.Until(at).Milliseconds()),
		PaymentID: "transfer-" + o.id,
		Amount:    o.amount,
	})
}

// status returns an order's status.
func (s *shop) status(ctx context.Context, id string) (string, error) {
	var status string
	err := s.db.QueryRow(ctx, "SELECT status FROM ordertimeout.order_info($1)", id).Scan(&status)
	return status, err
}

// waitStatus polls until the order has the status, or until the deadline.
func (s *shop) waitStatus(ctx context.Context, id, want string, deadline time.Time) error {
	for {
		got, err := s.status(ctx, id)
		if err != nil {
			return err
		}
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("order %s is %s, still not %s", id, got, want)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// count adds one to a counter of s.
func (s *shop) count(n *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*n++
}

// problem records an unexpected error for the report.
func (s *shop) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// counts returns the background orders placed and refused, and the problems.
func (s *shop) counts() (placed, refused int, problems []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.placed, s.refused, append([]string(nil), s.problems...)
}

func price(sku string) int64 {
	if sku == vinyl.sku {
		return vinyl.cents
	}
	for _, p := range catalogue {
		if p.sku == sku {
			return p.cents
		}
	}
	return 0
}

// sleep waits for d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
