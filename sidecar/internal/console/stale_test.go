package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// pauseForm reads the hidden fields of the settings page's pause form.
var pauseFormField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

func pauseForm(t *testing.T, site *site) url.Values {
	t.Helper()
	a := site.do(t, http.MethodGet, "/console/settings", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	form := url.Values{}
	for _, m := range pauseFormField.FindAllStringSubmatch(a.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2])) // as a browser reads the attribute
	}
	require.NotEmpty(t, form.Get("csrf"), a.Body)
	require.NotEmpty(t, form.Get("paused"), a.Body)
	return form
}

// A Resume button left on a stale page resumes only the pause it showed.
// Anna pauses during an incident; Olga opens the settings page (Resume);
// Anna resumes, then pauses again for a second incident; Olga's click on
// her old page resumed Anna's new pause, which she never saw, and timeouts
// cancelled orders during an incident. It is refused now (409), and the
// page shows the pause that holds.
func TestStaleResumeEndsNoOtherPause(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	configure := func(paused bool) {
		v := "false"
		if paused {
			v = "true"
		}
		// One simple-protocol batch: one transaction.
		sidecartest.Exec(t, s.DB, `SET LOCAL ordertimeout.actor = 'ops:anna';
			SELECT ordertimeout.configure(paused => `+v+`)`)
	}
	configure(true)
	stale := pauseForm(t, site)
	require.Equal(t, "false", stale.Get("paused"), "the page shows Resume")
	configure(false)
	configure(true) // a new incident, a new pause
	var pausedAt string
	require.NoError(t, s.DB.QueryRow(bg, "SELECT paused_at::text FROM ordertimeout.settings").Scan(&pausedAt))

	a := site.do(t, http.MethodPost, "/console/settings/pause", operator, stale, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusConflict, a.Status, "a stale Resume was taken: %s", a.Body)
	require.Contains(t, a.Body, "ops:anna")
	var paused bool
	var at string
	require.NoError(t, s.DB.QueryRow(bg, "SELECT paused, paused_at::text FROM ordertimeout.settings").Scan(&paused, &at))
	require.True(t, paused, "the new pause holds")
	require.Equal(t, pausedAt, at)

	// The page as it is now resumes it.
	a = site.do(t, http.MethodPost, "/console/settings/pause", operator, pauseForm(t, site), map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.NoError(t, s.DB.QueryRow(bg, "SELECT paused FROM ordertimeout.settings").Scan(&paused))
	require.False(t, paused)
}
