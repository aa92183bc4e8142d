package console_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A console page asked for with a method it does not take answers 405 with
// an Allow header naming the ones it takes (it answered 404, "There is no
// such page", to a GET of a POST-only endpoint). Unknown paths stay 404.
func TestWrongMethodIs405(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	origin := map[string]string{"Origin": site.URL}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodGet, "/console/settings/pause", "POST"},
		{http.MethodPut, "/console/settings/pause", "POST"},
		{http.MethodDelete, "/console/settings/pause", "POST"},
		{http.MethodGet, fmt.Sprintf("/console/conflicts/%d/resolve", s.LateID), "POST"},
		{http.MethodPut, fmt.Sprintf("/console/conflicts/%d/resolve", s.LateID), "POST"},
		{http.MethodPost, "/console/conflicts", "GET, HEAD"},
		{http.MethodPost, "/console/settings", "GET, HEAD"},
		{http.MethodPost, "/console/order", "GET, HEAD"},
		{http.MethodPost, "/console/", "GET, HEAD"},
		{http.MethodPost, "/console/static/console.css", "GET, HEAD"},
	} {
		a := site.do(t, c.method, c.path, operator, nil, origin)
		require.Equal(t, http.StatusMethodNotAllowed, a.Status, "%s %s: %s", c.method, c.path, a.Body)
		require.Equal(t, c.allow, a.Header.Get("Allow"), "%s %s", c.method, c.path)
		require.Contains(t, a.Body, "takes "+c.allow+" only", "%s %s", c.method, c.path)
	}
	require.Equal(t, http.StatusNotFound, site.do(t, http.MethodGet, "/console/nope", operator, nil, nil).Status)
	require.Equal(t, http.StatusNotFound, site.do(t, http.MethodPut, "/console/nope", operator, nil, origin).Status)
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State, "nothing changed")
}
