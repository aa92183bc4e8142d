package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// The conflicts page tells the operator that a note is kept with the
// resolution (it said "notes are not recorded yet", though they are), and
// the note then shows under Resolved.
func TestNotesAreSaidToBeKept(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	a := site.do(t, http.MethodGet, "/console/conflicts", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.NotContains(t, a.Body, "not recorded")
	require.Contains(t, a.Body, "A note is kept with the resolution and shown under Resolved.")

	const note = "refunded by hand; ticket 4711"
	a = site.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", s.MismatchID), operator,
		url.Values{"csrf": {site.token(t, operator)}, "resolution": {"manual"}, "note": {note}}, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	a = site.do(t, http.MethodGet, "/console/conflicts", viewer, nil, nil)
	require.Contains(t, row(t, a.Body, fmt.Sprintf("resolved-%d", s.MismatchID)), `<td class="note">`+note+`</td>`)
}
