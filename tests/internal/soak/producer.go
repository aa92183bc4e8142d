package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
)

// scenario is what the buyer of an order does.
type scenario int

const (
	// unpaid: nobody pays; the timeout cancels the order.
	unpaid scenario = iota
	// paid: begin_payment, then the gateway's callback confirms the
	// payment 50–500 ms later.
	paid
	// silent: begin_payment; the gateway has the money but never calls
	// back; the payment check at paying_until confirms it.
	silent
	// late: begin_payment; the buyer pays only after the order's deadline:
	// the gateway refuses it once the order is closed there, or it becomes
	// a late-payment conflict that the sidecar resolves.
	late
	// declined: begin_payment; the gateway declines and calls back; the
	// order returns to PENDING and is cancelled.
	declined
	scenarios
)

var scenarioNames = [scenarios]string{"unpaid", "paid", "silent", "late", "declined"}

// pick draws a scenario: half paid, a tenth each silent, late and declined,
// a fifth unpaid.
func pick(rng *rand.Rand) scenario {
	switch n := rng.IntN(100); {
	case n < 50:
		return paid
	case n < 60:
		return silent
	case n < 70:
		return late
	case n < 80:
		return declined
	default:
		return unpaid
	}
}

// giveUp bounds how long one call is retried while the database is away.
const giveUp = 60 * time.Second

// ledger is what the producer was told: which orders exist for sure, and
// which ones must end paid or cancelled.
type ledger struct {
	mu        sync.Mutex
	created   []string // create_order acknowledged
	paid      []string // payment started in time and paid at the gateway: must end PAID, never cancelled
	cancelled []string // nobody paid: must end CANCELLED
	byKind    [scenarios]int
	abandoned int // create_order given up (ambiguous: may exist)
	refused   int // begin_payment refused (the order expired first): counted as unpaid
	unsure    int // begin_payment or the gateway call given up: no expectation
	errs      map[string]int

	nCreated atomic.Int64
	retries  atomic.Int64
}

func (l *ledger) createdCount() int64 { return l.nCreated.Load() }

func (l *ledger) noteErr(what string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = map[string]int{}
	}
	l.errs[what+": "+pgcluster.ErrorKind(err)]++
}

// produce creates orders at Rate until produceCtx ends, then lets the orders
// already started finish (on ctx).
func (r *run) produce(produceCtx, ctx context.Context) {
	jobs := make(chan int, 2*r.cfg.Rate+100)
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r.order(ctx, i)
			}
		}()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start, next := time.Now(), 0
loop:
	for {
		select {
		case <-produceCtx.Done():
			break loop
		case now := <-tick.C:
			due := int(now.Sub(start).Seconds() * float64(r.cfg.Rate))
		send:
			for next < due {
				select {
				case jobs <- next:
					next++
				default:
					break send // the workers are behind: the rate drops
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
}

// order plays order i's scenario.
func (r *run) order(ctx context.Context, i int) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)))
	id := fmt.Sprintf("o%08d", i)
	sc := pick(rng)
	items, options := content(rng, id)

	err := r.call(ctx, func(ctx context.Context) error {
		_, err := r.prod.Exec(ctx, `SELECT 1 FROM ordertimeout.create_order($1, $2::jsonb, $3 * interval '1 microsecond', $4::jsonb)`,
			id, items, r.cfg.Timeout.Microseconds(), options)
		return err
	})
	l := &r.ledger
	if err != nil {
		l.noteErr("create_order", err)
		l.mu.Lock()
		l.abandoned++
		l.mu.Unlock()
		return
	}
	l.nCreated.Add(1)
	l.mu.Lock()
	l.created = append(l.created, id)
	l.byKind[sc]++
	if sc == unpaid {
		l.cancelled = append(l.cancelled, id)
	}
	l.mu.Unlock()
	if sc == unpaid {
		return
	}

	payment := "p" + id
	err = r.call(ctx, func(ctx context.Context) error {
		_, err := r.prod.Exec(ctx, "SELECT 1 FROM ordertimeout.begin_payment($1, $2)", id, payment)
		return err
	})
	begun := time.Now()
	if err != nil {
		l.noteErr("begin_payment", err)
		var pgErr *pgconn.PgError
		l.mu.Lock()
		if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, sqlstate.ClassOT) {
			// Refused, e.g. expired before the producer got to it: unpaid.
			l.refused++
			l.cancelled = append(l.cancelled, id)
		} else {
			l.unsure++
		}
		l.mu.Unlock()
		return
	}

	b := sidecarproc.Behaviour{PaymentID: payment, Amount: "10.00"}
	switch sc {
	case paid:
		b.Behaviour, b.DelayMS = sidecarproc.Late, 50+rng.IntN(451)
	case silent:
		b.Behaviour = sidecarproc.Silent
	case late:
		b.Behaviour = sidecarproc.Late
		b.DelayMS = int((r.cfg.Timeout + r.cfg.PayingWindow).Milliseconds()) + 1000 + rng.IntN(2000)
	case declined:
		b.Behaviour = sidecarproc.Decline
	}
	// An error naming the callback means the fake took the payment but could
	// not tell the database (it was away): the sidecar's checks find it.
	if err := r.fake.SetOrder(ctx, id, b); err != nil && !strings.Contains(err.Error(), "callback") {
		l.noteErr("fake gateway", err)
		l.mu.Lock()
		l.unsure++
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case sc == declined:
		l.cancelled = append(l.cancelled, id)
	case sc == late:
	case time.Since(begun) > r.cfg.PayingWindow/2:
		// The gateway heard of the payment so long after begin_payment that
		// the payment check may have found nothing: no expectation.
		l.unsure++
	default:
		l.paid = append(l.paid, id)
	}
}

// content returns an order's items and options: one or two SKUs, 1–3 units
// each, an amount of 10, and for a tenth of the orders a coupon, for another
// tenth points.
func content(rng *rand.Rand, id string) (items, options string) {
	type item struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	first := rng.IntN(skus)
	list := []item{{SKU: fmt.Sprintf("S%d", first), Qty: 1 + rng.IntN(3)}}
	if rng.IntN(2) == 0 {
		list = append(list, item{SKU: fmt.Sprintf("S%d", (first+1+rng.IntN(skus-1))%skus), Qty: 1 + rng.IntN(3)})
	}
	opts := map[string]any{"amount": 10}
	switch rng.IntN(10) {
	case 0:
		opts["coupon"] = "c-" + id
	case 1:
		opts["points_account"] = fmt.Sprintf("acct%d", rng.IntN(accounts))
		opts["points"] = 1 + rng.IntN(5)
	}
	ib, _ := json.Marshal(list)
	ob, _ := json.Marshal(opts)
	return string(ib), string(ob)
}

// call runs f until it succeeds, fails with an error that is not the
// database's absence, or giveUp passes; it returns the last error. Only
// idempotent calls go through it: a call cut off may have committed.
func (r *run) call(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(giveUp)
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || !pgcluster.Unavailable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		r.ledger.retries.Add(1)
		sleep(ctx, 50*time.Millisecond)
	}
}
