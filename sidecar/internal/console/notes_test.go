package console_test

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
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

// An operator who resolves a conflict the same way as another already did,
// from a page loaded before, with a note of their own, is told that their
// note was not kept (409 and the hint) instead of "Conflict N resolved"
// while the note was dropped. The first note stays, under Resolved and in
// the database; nothing is written. The same for a refund claimed already.
// Sent again without a note, or with the same note, the resolution is a
// retry and answered as before.
func TestSecondNoteOnTheSameResolutionIsRefused(t *testing.T) {
	t.Parallel()
	s, olgaSite := newSite(t)
	other := console.Credentials{User: "otto", Password: "other-operator-secret"}
	ottoSite := serve(t, console.Config{Pool: s.DB, Operator: other, Logger: sidecartest.Logger()})
	olgaToken, ottoToken := olgaSite.token(t, operator), ottoSite.token(t, other)
	resolve := func(on *site, who console.Credentials, token string, id int64, resolution, note string) answer {
		t.Helper()
		form := url.Values{"csrf": {token}, "resolution": {resolution}}
		if note != "" {
			form.Set("note", note)
		}
		return on.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", id), who, form,
			map[string]string{"Origin": on.URL})
	}
	const (
		first  = "the buyer keeps it; ticket 4711"
		second = "handed to accounting; ticket 4712"
	)
	hint := template.HTMLEscapeString("Someone resolved this conflict the same way already, or claimed its refund: it keeps the note of that decision (see Resolved below, or the order's page while the refund runs), and yours was not kept.")

	a := resolve(olgaSite, operator, olgaToken, s.MismatchID, "manual", first)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	before := readConflict(t, s.DB, s.MismatchID)

	a = resolve(ottoSite, other, ottoToken, s.MismatchID, "manual", second)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "manual refused ("+sqlstate.RepeatWithAnotherNote+"): ")
	require.Contains(t, a.Body, fmt.Sprintf("conflict %d is already resolved the same way (manual) by console:olga", s.MismatchID))
	require.Contains(t, a.Body, hint)
	require.Equal(t, before, readConflict(t, s.DB, s.MismatchID), "the refused repeat wrote nothing")
	require.Equal(t, first, *before.Note)
	require.Equal(t, "console:olga", *before.ResolvedBy)
	require.EqualValues(t, 1, before.Events)
	resolved := row(t, olgaSite.do(t, http.MethodGet, "/console/conflicts", viewer, nil, nil).Body, fmt.Sprintf("resolved-%d", s.MismatchID))
	require.Contains(t, resolved, `<td class="note">`+first+`</td>`)
	require.NotContains(t, resolved, "4712")

	// A retry: the same note, or none, by either operator.
	a = resolve(olgaSite, operator, olgaToken, s.MismatchID, "manual", first)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	a = resolve(ottoSite, other, ottoToken, s.MismatchID, "manual", "")
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, before, readConflict(t, s.DB, s.MismatchID))

	// A refund claimed with a note: another note on refund is refused.
	a = resolve(olgaSite, operator, olgaToken, s.LateID, "refund", first)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	claimed := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "refunding", claimed.State)
	a = resolve(ottoSite, other, ottoToken, s.LateID, "refund", second)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "refund refused ("+sqlstate.RepeatWithAnotherNote+"): ")
	require.Contains(t, a.Body, fmt.Sprintf("conflict %d is already claimed for a refund by console:olga", s.LateID))
	require.Contains(t, a.Body, hint)
	require.Equal(t, claimed, readConflict(t, s.DB, s.LateID), "the refused repeat wrote nothing")
	a = resolve(ottoSite, other, ottoToken, s.LateID, "refund", "")
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, claimed, readConflict(t, s.DB, s.LateID))
}

var noteInput = regexp.MustCompile(`<input type="text" name="note" maxlength="([0-9]+)"`)

// A note is 1 to 500 characters (code points), but a browser's maxlength
// counts UTF-16 units, two for a character outside the BMP: with
// maxlength="500" a note of 500 such characters was cut to 250. The field
// takes any note of 500 characters, which is kept whole; the database
// refuses a longer one, and the page says why.
func TestNoteOutsideTheBMPIsKeptWhole(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	note := strings.Repeat("😀", 250) + strings.Repeat("𠀀", 250) // 500 characters, 1,000 UTF-16 units
	a := site.do(t, http.MethodGet, "/console/conflicts", operator, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	m := noteInput.FindStringSubmatch(a.Body)
	require.NotNil(t, m, "no maxlength on the note field: %s", a.Body)
	maxLength, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, maxLength, len(utf16.Encode([]rune(note))),
		"the note field cannot take a note of 500 characters outside the BMP")

	resolve := func(id int64, note string) answer {
		return site.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", id), operator,
			url.Values{"csrf": {site.token(t, operator)}, "resolution": {"manual"}, "note": {note}}, map[string]string{"Origin": site.URL})
	}
	a = resolve(s.MismatchID, note+"😀")
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "OT149")
	a = resolve(s.MismatchID, note)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	a = site.do(t, http.MethodGet, "/console/conflicts", viewer, nil, nil)
	require.Contains(t, row(t, a.Body, fmt.Sprintf("resolved-%d", s.MismatchID)), `<td class="note">`+note+`</td>`)
}

// A note that is not UTF-8 (a hand-made form, a browser told another
// charset), or holds a NUL, is the request's fault: 400, nothing written. Before, PostgreSQL
// refused it (22021) and the console answered 500 with an ERROR line, as for
// a database that failed.
func TestNoteNotUTF8IsABadRequest(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	for _, note := range []string{"abc\xffdef", "abc\x00def"} {
		a := site.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", s.LateID), operator,
			url.Values{"csrf": {site.token(t, operator)}, "resolution": {"manual"}, "note": {note}},
			map[string]string{"Origin": site.URL})
		require.Equal(t, http.StatusBadRequest, a.Status, a.Body)
		require.Contains(t, a.Body, "The note must be UTF-8 text without NUL characters")
		require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State, "nothing written")
	}
}
