package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// row returns the HTML of the table row with the given id.
func row(t *testing.T, body, id string) string {
	t.Helper()
	start := strings.Index(body, `id="`+id+`"`)
	require.GreaterOrEqual(t, start, 0, "no row %s in %s", id, body)
	end := strings.Index(body[start:], "</tr>")
	require.GreaterOrEqual(t, end, 0)
	return body[start : start+end]
}

// A late payment of 100 EUR on an order of 100.00 EUR is the order's amount:
// the database compares numbers and reinstates it, so the console neither
// marks the amount as different nor warns that reinstate will be refused.
// (It compared the text, "100" against "100.00".) A payment that differs is
// still marked.
func TestAmountsAreComparedAsNumbers(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-ROUND', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount":100.00,"currency":"EUR"}')`)
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.cancel_order('O-ROUND', 'requested')")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-ROUND', 'pay-round', 100, 'EUR')")
	id := sidecartest.Int(t, s.DB, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'O-ROUND'")

	a := site.do(t, http.MethodGet, "/console/conflicts", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	round := row(t, a.Body, fmt.Sprintf("conflict-%d", id))
	require.Contains(t, round, `<td class="num">100 EUR</td>`)
	require.Contains(t, round, `<td class="num">100.00 EUR</td>`)
	require.NotContains(t, round, "differs")
	mismatch := row(t, a.Body, fmt.Sprintf("conflict-%d", s.MismatchID))
	require.Contains(t, mismatch, `<td class="num differs">0.01 EUR</td>`)
	require.Contains(t, mismatch, "the amount differs: reinstate will be refused")

	a = site.resolve(t, operator, id, "reinstate", site.token(t, operator), nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "PAID", sidecartest.Status(t, s.DB, "O-ROUND"))
}

// A conflict the sidecar handed to a person (hand_over_conflict) says so in
// the list, with the sidecar's reason (escaped: it quotes the gateway), and
// can still be decided by an operator.
func TestHandedOverConflictShowsWhy(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-HAND', '[{"sku":"A","qty":1}]', interval '1 hour', '{"amount":7,"currency":"EUR"}')`)
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.cancel_order('O-HAND', 'requested')")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-HAND', 'pay-hand', 7, 'EUR')")
	id := sidecartest.Int(t, s.DB, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'O-HAND'")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.hand_over_conflict($1, 'sidecar: the gateway said <b>pending</b> 10 times')", id)

	a := site.do(t, http.MethodGet, "/console/conflicts", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	hand := row(t, a.Body, fmt.Sprintf("conflict-%d", id))
	require.Contains(t, hand, "left to a person by the sidecar: sidecar: the gateway said &lt;b&gt;pending&lt;/b&gt; 10 times")
	require.Contains(t, hand, `value="reinstate"`, "still decided here")
	require.Contains(t, hand, "policy: manual", "the settings' policy (this site's)")
	require.NotContains(t, row(t, a.Body, fmt.Sprintf("conflict-%d", s.MismatchID)), "left to a person")

	a = site.resolve(t, operator, id, "manual", site.token(t, operator), nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.EqualValues(t, 1, sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'O-HAND' AND resolution = 'manual'"))
}

// The list shows the policy the sidecar follows for each conflict: that of
// the method its payment was started with, not the order's last one.
func TestConflictShowsThePolicyOfItsPaymentsMethod(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-TWO', '[{"sku":"A","qty":1}]', interval '1 hour')`)
	for _, a := range [][2]string{{"pay-bank", "bank_transfer"}, {"pay-card", "card"}} {
		sidecartest.Exec(t, s.DB, "SELECT ordertimeout.begin_payment('O-TWO', $1, method => $2)", a[0], a[1])
		sidecartest.Exec(t, s.DB, "SELECT ordertimeout.fail_payment('O-TWO', $1)", a[0])
	}
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.cancel_order('O-TWO', 'requested')")
	sidecartest.Exec(t, s.DB, "SELECT ordertimeout.confirm_payment('O-TWO', 'pay-bank')")
	id := sidecartest.Int(t, s.DB, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'O-TWO'")

	a := site.do(t, http.MethodGet, "/console/conflicts", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, row(t, a.Body, fmt.Sprintf("conflict-%d", id)), "policy: refund", "the transfer's, not the card's")

	// The order's page shows each attempt's method.
	a = site.do(t, http.MethodGet, "/console/order?id=O-TWO", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, row(t, a.Body, "payment-pay-bank"), "<td>bank_transfer</td>")
	require.Contains(t, row(t, a.Body, "payment-pay-card"), "<td>card</td>")
}
