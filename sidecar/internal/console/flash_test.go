package console_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The message a redirect after an action shows comes from the URL, which
// anyone can write: a link to /console/settings?paused=true showed "Paused:
// no timeout cancels anything" while timeouts cancelled, and one to
// /console/conflicts?resolved=N&outcome=reinstated said an open conflict
// was resolved. The message is shown only when the database agrees.
func TestFlashAgreesWithTheDatabase(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	a := site.do(t, http.MethodGet, "/console/settings?paused=true", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, a.Body, `id="running"`)
	require.NotContains(t, a.Body, "Paused: no timeout cancels anything until you resume.")

	for _, outcome := range []string{"reinstated", "manual", "refunded", "refunding"} {
		a = site.do(t, http.MethodGet, fmt.Sprintf("/console/conflicts?resolved=%d&outcome=%s", s.LateID, outcome), operator, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.NotContains(t, a.Body, fmt.Sprintf("Conflict %d", s.LateID), "%s: the conflict is open", outcome)
	}

	// After a real action the message is shown.
	a = site.resolve(t, operator, s.LateID, "manual", site.token(t, operator), nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	a = site.do(t, http.MethodGet, a.Location, operator, nil, nil)
	require.Contains(t, a.Body, fmt.Sprintf("Conflict %d resolved: manual.", s.LateID))
	pauseInTheDatabase(t, s)
	a = site.do(t, http.MethodGet, "/console/settings?paused=true", operator, nil, nil)
	require.Contains(t, a.Body, "Paused: no timeout cancels anything until you resume.")
	require.NotContains(t, site.do(t, http.MethodGet, "/console/settings?paused=false", operator, nil, nil).Body, "Resumed:")
}

func pauseInTheDatabase(t *testing.T, s shop) {
	t.Helper()
	_, err := s.DB.Exec(bg, "SELECT ordertimeout.configure(paused => true)")
	require.NoError(t, err)
}

// The message after a resolution names the resolution the conflict has:
// a link that names another (a stale bookmark, a hand-made URL) or a
// conflict that does not exist shows none. Before, only the conflict's
// state was compared: the page said a reinstated conflict was refunded.
func TestFlashNamesTheResolutionRecorded(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	a := site.resolve(t, operator, s.LateID, "reinstate", site.token(t, operator), nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "reinstated", *readConflict(t, s.DB, s.LateID).Resolution)

	for _, outcome := range []string{"refunded", "manual", "refunding"} {
		a = site.do(t, http.MethodGet, fmt.Sprintf("/console/conflicts?resolved=%d&outcome=%s", s.LateID, outcome), viewer, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.NotContains(t, a.Body, fmt.Sprintf("Conflict %d", s.LateID), "%s: the conflict was reinstated", outcome)
	}
	a = site.do(t, http.MethodGet, fmt.Sprintf("/console/conflicts?resolved=%d&outcome=reinstated", s.LateID), viewer, nil, nil)
	require.Contains(t, a.Body, fmt.Sprintf("Conflict %d resolved: reinstated.", s.LateID))
	a = site.do(t, http.MethodGet, "/console/conflicts?resolved=987654&outcome=manual", viewer, nil, nil)
	require.NotContains(t, a.Body, "Conflict 987654", "a conflict that does not exist")
}
