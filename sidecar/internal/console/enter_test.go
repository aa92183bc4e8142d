package console_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
)

// browserTab starts Chromium and returns a tab signed in as who, bounded by
// a minute.
func browserTab(t *testing.T, who console.Credentials) context.Context {
	t.Helper()
	chromium := chromiumPath(t)
	var out bytes.Buffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(&out),
	)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium %s: %v\n%s", chromium, err, out.String())
	}
	ctx, cancel := context.WithTimeout(browser, time.Minute)
	t.Cleanup(cancel)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(who.User+":"+who.Password))
	_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": auth},
	})
	require.NoError(t, err)
	return ctx
}

// Enter in a conflict's note field must not decide about the money. The
// form's first button was Reinstate, so the browser's implicit submission
// (Enter in a text field submits the form as if its first submit button
// were clicked) reinstated the order: an operator typing "refund: buyer
// asked" and pressing Enter kept the money and marked the order PAID.
func TestEnterInANoteDecidesNothing(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	tab := browserTab(t, operator)

	resp, err := chromedp.RunResponse(tab, chromedp.Navigate(site.URL+"/console/conflicts"))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusOK, resp.Status)
	note := fmt.Sprintf(`#conflict-%d input[name="note"]`, s.LateID)
	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(note))))
	// The page runs no script (CSP); DevTools may. Record which button a
	// submission of this conflict's form names, and keep the page.
	form := fmt.Sprintf(`#conflict-%d form`, s.LateID)
	_, err = chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		window.submittedWith = "";
		document.querySelector(%q).addEventListener("submit", e => {
			window.submittedWith = e.submitter ? (e.submitter.value || "a button") : "the form";
			e.preventDefault();
		});
		return true;
	})()`, form)))
	require.NoError(t, err)
	// Input.dispatchKeyEvent returns once the key is handled, and implicit
	// submission fires the submit event while handling it.
	require.NoError(t, chromedp.Do(tab, chromedp.SendKeys(note, "refund: the buyer asked"+kb.Enter)))
	submitted, err := chromedp.Run(tab, chromedp.Evaluate[string](`window.submittedWith`))
	require.NoError(t, err)
	require.Empty(t, submitted, "Enter in the note submitted the form with %q", submitted)

	// The buttons still act, each with its own resolution.
	_, err = chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`(document.querySelector(%q).click(), true)`,
		fmt.Sprintf(`#conflict-%d button[value="manual"]`, s.LateID))))
	require.NoError(t, err)
	submitted, err = chromedp.Run(tab, chromedp.Evaluate[string](`window.submittedWith`))
	require.NoError(t, err)
	require.Equal(t, "manual", submitted)
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "open", c.State, "Enter in the note resolved the conflict as %v", c.Resolution)
	require.Zero(t, c.Events)
}
