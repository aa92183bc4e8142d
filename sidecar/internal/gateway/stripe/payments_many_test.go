package stripe_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway/stripe"
)

// object is one charge, refund or Checkout Session in a store.
type object struct {
	id      string
	created int64
	status  string
	intent  string // PaymentIntent id, or ""
}

// store is a Stripe account behind a scripted server: its lists filter by
// created[gte] / created[lt] (and a session's payment_intent and status)
// and page newest first with starting_after and limit, as Stripe does.
type store struct {
	mu                         sync.Mutex
	charges, refunds, sessions []object
}

func newStore(t *testing.T) (*store, *scripted, *stripe.Driver) {
	s, u := newScripted(t)
	st := &store{}
	s.handlers["GET /v1/charges"] = func(q url.Values) answer { return st.page(q, "charge") }
	s.handlers["GET /v1/refunds"] = func(q url.Values) answer { return st.page(q, "refund") }
	s.handlers["GET /v1/checkout/sessions"] = func(q url.Values) answer { return st.page(q, "checkout.session") }
	return st, s, newDriver(t, u)
}

func (st *store) page(q url.Values, kind string) answer {
	st.mu.Lock()
	defer st.mu.Unlock()
	all := map[string][]object{"charge": st.charges, "refund": st.refunds, "checkout.session": st.sessions}[kind]
	num := func(k string, def int64) int64 {
		if v := q.Get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				panic(err)
			}
			return n
		}
		return def
	}
	gte, lt, limit := num("created[gte]", 0), num("created[lt]", 1<<62), int(num("limit", 10))
	var data []object
	for _, o := range all {
		if o.created >= gte && o.created < lt &&
			(q.Get("payment_intent") == "" || q.Get("payment_intent") == o.intent) &&
			(kind != "checkout.session" || q.Get("status") == "" || q.Get("status") == o.status) {
			data = append(data, o)
		}
	}
	slices.SortFunc(data, func(a, b object) int { return cmp.Or(cmp.Compare(b.created, a.created), strings.Compare(b.id, a.id)) })
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(data, func(o object) bool { return o.id == after })
		if i < 0 {
			panic("starting_after " + after)
		}
		data = data[i+1:]
	}
	more := len(data) > limit
	data = data[:min(limit, len(data))]
	items := make([]map[string]any, 0, len(data))
	for _, o := range data {
		m := map[string]any{"id": o.id, "object": kind, "created": o.created, "status": o.status,
			"amount": 100, "amount_captured": 100, "captured": true, "currency": "eur", "metadata": map[string]string{}}
		if o.intent != "" {
			if kind == "checkout.session" {
				m["payment_intent"] = o.intent
				m["client_reference_id"] = "order-of-" + o.id
			} else {
				m["payment_intent"] = map[string]any{"id": o.intent, "object": "payment_intent", "metadata": map[string]string{"order_id": "order-of-" + o.intent}}
			}
		}
		items = append(items, m)
	}
	b, err := json.Marshal(map[string]any{"object": "list", "has_more": more, "url": "/v1/x", "data": items})
	if err != nil {
		panic(err)
	}
	return answer{200, string(b)}
}

// requests counts the requests seen since the last call, by path.
func requests(s *scripted) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	for _, k := range s.seen {
		n[k]++
	}
	s.seen, s.queries = nil, nil
	return n
}

// want is what Payments should answer for the store's charges and
// refunds at or after since, named by PaymentIntent (or charge) id.
func (st *store) want(since int64) []gateway.Payment {
	var out []gateway.Payment
	add := func(os []object, ok func(string) bool, status string) {
		for _, o := range os {
			if o.created < since || !ok(o.status) {
				continue
			}
			p := gateway.Payment{PaymentID: cmp.Or(o.intent, o.id), Amount: "1.00", Currency: "EUR", Status: status, At: time.Unix(o.created, 0).UTC()}
			if o.intent != "" {
				p.OrderID = "order-of-" + o.intent
			}
			out = append(out, p)
		}
	}
	add(st.charges, func(s string) bool { return s == "succeeded" }, gateway.PaymentPaid)
	add(st.refunds, func(s string) bool { return s == "succeeded" || s == "pending" }, gateway.PaymentRefunded)
	slices.SortFunc(out, func(a, b gateway.Payment) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.PaymentID, b.PaymentID), strings.Compare(a.Status, b.Status))
	})
	return out
}

// readAll pages through Payments as the reconcile worker does: from the
// last one's time on, dropping those it has (by payment id and status),
// until a page is short. It returns what it read and the list requests
// (charges and refunds) of the call that made the most.
func readAll(t *testing.T, d *stripe.Driver, s *scripted, since time.Time, limit int) ([]gateway.Payment, int) {
	t.Helper()
	var out []gateway.Payment
	seen := map[[2]string]bool{}
	most := 0
	cursor := since
	for calls := 0; ; calls++ {
		require.Less(t, calls, 1000, "paging must end")
		page, err := d.Payments(bg, cursor, limit)
		require.NoError(t, err)
		n := requests(s)
		most = max(most, n["GET /v1/charges"]+n["GET /v1/refunds"])
		added := 0
		for _, p := range page {
			require.False(t, p.At.Before(cursor), "nothing before the cursor")
			if k := [2]string{p.PaymentID, p.Status}; !seen[k] {
				seen[k] = true
				out = append(out, p)
				added++
			}
		}
		require.True(t, slices.IsSortedFunc(page, func(a, b gateway.Payment) int {
			return cmp.Or(a.At.Compare(b.At), strings.Compare(a.PaymentID, b.PaymentID))
		}), "oldest first, then by payment id")
		if len(page) < limit {
			return out, most
		}
		require.NotZero(t, added, "a full page must bring something new")
		cursor = page[len(page)-1].At
	}
}

// More than MaxListed (10,000) succeeded charges since then (the first
// run's day at 12,000 charges a day, and a burst): Payments returns the
// oldest limit with a bounded number of requests, rather than refusing (the
// reconcile job kept its watermark on that error, and stalled for good).
// Paging on from the last one's time reads every one exactly once.
func TestPaymentsManyChargesSinceThen(t *testing.T) {
	t.Parallel()
	st, s, d := newStore(t)
	since := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	t0 := since.Unix()
	for i := range 12000 {
		c := object{id: fmt.Sprintf("ch_%05d", i), created: t0 + int64(i)*86400/12000, status: "succeeded"}
		if i%10 == 0 {
			c.intent = fmt.Sprintf("pi_%05d", i)
		}
		if i%7 == 0 {
			c.status = "failed"
		}
		st.charges = append(st.charges, c)
	}
	for i := range 3000 { // a burst: 3,000 in ten minutes, 5 a second
		st.charges = append(st.charges, object{id: fmt.Sprintf("ch_b%04d", i), created: t0 + 7200 + int64(i)/5, status: "succeeded"})
	}
	st.charges = append(st.charges, object{id: "ch_before", created: t0 - 1, status: "succeeded"})
	for i := range 500 {
		st.refunds = append(st.refunds, object{id: fmt.Sprintf("re_%04d", i), created: t0 + 100 + int64(i)*150, status: "succeeded",
			intent: fmt.Sprintf("pi_%05d", i*10)})
	}
	want := st.want(t0)
	require.Greater(t, len(want), stripe.MaxListed)

	ps, err := d.Payments(bg, since, gateway.MaxPaymentsLimit)
	require.NoError(t, err, "more than 10,000 charges since then must not stall reconciliation")
	require.Equal(t, want[:gateway.MaxPaymentsLimit], ps, "the oldest limit")
	n := requests(s)
	lists := n["GET /v1/charges"] + n["GET /v1/refunds"]
	require.LessOrEqual(t, lists, 60, "list requests")
	intents := map[string]bool{}
	for _, p := range ps {
		if strings.HasPrefix(p.PaymentID, "pi_") {
			intents[p.PaymentID] = true
		}
	}
	require.Equal(t, len(intents), n["GET /v1/checkout/sessions"], "one session lookup per PaymentIntent returned")
	t.Logf("one call: %d list requests, %d session lookups", lists, n["GET /v1/checkout/sessions"])

	got, most := readAll(t, d, s, since, gateway.MaxPaymentsLimit)
	require.Equal(t, want, got, "every one, once, oldest first")
	require.LessOrEqual(t, most, 60, "list requests of any call")
	t.Logf("paged through %d: at most %d list requests a call", len(got), most)
}

// More than 10,000 complete Checkout Sessions created in the day before
// since: only the sessions of the PaymentIntents returned are looked up,
// and the charges that paid a session are named by it.
func TestPaymentsManySessions(t *testing.T) {
	t.Parallel()
	st, s, d := newStore(t)
	since := time.Now().Add(-time.Hour).Truncate(time.Second)
	t0 := since.Unix()
	for i := range 12000 {
		st.sessions = append(st.sessions, object{id: fmt.Sprintf("cs_%05d", i), created: t0 - 86400 + int64(i)*7, status: "complete",
			intent: fmt.Sprintf("pi_s%05d", i)})
	}
	st.charges = []object{
		{id: "ch_1", created: t0 + 10, status: "succeeded", intent: "pi_s11999"},
		{id: "ch_2", created: t0 + 20, status: "succeeded", intent: "pi_s00003"},
		{id: "ch_3", created: t0 + 30, status: "succeeded", intent: "pi_plain"},
	}
	ps, err := d.Payments(bg, since, gateway.MaxPaymentsLimit)
	require.NoError(t, err, "a Checkout shop at 10,000 sessions a day must reconcile")
	var names []string
	for _, p := range ps {
		names = append(names, p.PaymentID+" "+p.OrderID)
	}
	require.Equal(t, []string{"cs_11999 order-of-cs_11999", "cs_00003 order-of-cs_00003", "pi_plain order-of-pi_plain"}, names)
	s.mu.Lock()
	var lookups []string
	for i, k := range s.seen {
		if k == "GET /v1/checkout/sessions" {
			q := s.queries[i]
			require.Equal(t, "complete", q.Get("status"))
			require.Equal(t, strconv.FormatInt(t0-86400, 10), q.Get("created[gte]"))
			lookups = append(lookups, q.Get("payment_intent"))
		}
	}
	s.mu.Unlock()
	require.ElementsMatch(t, []string{"pi_s11999", "pi_s00003", "pi_plain"}, lookups, "one lookup per PaymentIntent returned, never the day's list")
}

// A second holding more charges than a Stripe page (100), and more than
// fit in what is left of a call's limit: the second is read whole, the
// call returns the part of it that fits, and the next call, from that
// second, returns it again in the same order with the rest: none is lost.
// A second holding more than MaxListed is a bad answer, never skipped.
func TestPaymentsSecondAcrossCalls(t *testing.T) {
	t.Parallel()
	st, s, d := newStore(t)
	since := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	t0 := since.Unix()
	for i := range 120 {
		st.charges = append(st.charges, object{id: fmt.Sprintf("ch_a%03d", i), created: t0 + int64(i), status: "succeeded"})
	}
	for i := range 250 { // one second, 250 charges and 30 refunds
		st.charges = append(st.charges, object{id: fmt.Sprintf("ch_x%03d", i), created: t0 + 600, status: "succeeded",
			intent: fmt.Sprintf("pi_x%03d", i)})
	}
	for i := range 30 {
		st.refunds = append(st.refunds, object{id: fmt.Sprintf("re_x%03d", i), created: t0 + 600, status: "succeeded",
			intent: fmt.Sprintf("pi_x%03d", i*3)})
	}
	for i := range 90 {
		st.charges = append(st.charges, object{id: fmt.Sprintf("ch_z%03d", i), created: t0 + 601 + int64(i)*30, status: "succeeded"})
	}
	want := st.want(t0)

	first, err := d.Payments(bg, since, 300)
	require.NoError(t, err)
	require.Equal(t, want[:300], first)
	second, err := d.Payments(bg, time.Unix(t0+600, 0), 300)
	require.NoError(t, err)
	require.Equal(t, want[120:420], second, "the whole second again, in the same order, then on")
	requests(s)

	for _, limit := range []int{300, 281, gateway.MaxPaymentsLimit} {
		got, _ := readAll(t, d, s, since, limit)
		require.Equal(t, want, got, "limit %d", limit)
	}

	// 10,001 charges in one second.
	for i := range stripe.MaxListed + 1 {
		st.charges = append(st.charges, object{id: fmt.Sprintf("ch_m%05d", i), created: t0 + 5000, status: "succeeded"})
	}
	_, err = d.Payments(bg, time.Unix(t0+4000, 0), 10)
	require.ErrorIs(t, err, gateway.ErrBadAnswer)
	require.Contains(t, err.Error(), "cannot be paged past")
}
