package sidecarproc_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// The test binary doubles as the child: with SIDECARPROC_CHILD set it runs
// the child's part instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("SIDECARPROC_CHILD") {
	case "":
		os.Exit(m.Run())
	case "serve": // answers HTTP until SIGTERM, then exits 0
		// SIGTERM is caught before the port answers, as the real binaries
		// do: the parent may stop the child as soon as it answers.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		l, err := net.Listen("tcp", os.Getenv("SIDECARPROC_ADDR"))
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(2)
		}
		go func() { _ = http.Serve(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
		fmt.Println("serving")
		<-term
		os.Exit(0)
	case "ignore-term": // never exits by itself
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		select {}
	case "fail": // exits 3 at once
		fmt.Println("something went wrong")
		os.Exit(3)
	}
}

func start(t *testing.T, mode string, env ...string) *sidecarproc.Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), mode+".log")
	p, err := sidecarproc.Start(sidecarproc.Command{Name: mode, Bin: os.Args[0],
		Env: append([]string{"SIDECARPROC_CHILD=" + mode}, env...), Log: log, OwnGroup: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func TestStartWaitStop(t *testing.T) {
	t.Parallel()
	addr, err := sidecarproc.FreeAddr()
	require.NoError(t, err)
	p := start(t, "serve", "SIDECARPROC_ADDR="+addr)
	require.NoError(t, p.WaitHTTP(t.Context(), "http://"+addr+"/", 30*time.Second))
	require.True(t, p.Running())
	require.NoError(t, p.Stop(30*time.Second), "a clean exit on SIGTERM")
	require.False(t, p.Running())
	require.NoError(t, p.Err())
	require.ErrorContains(t, p.Stop(time.Second), "had exited already")
	require.Contains(t, sidecarproc.Tail(p.Log(), 5), "serving")
}

func TestStopKillsAfterTimeout(t *testing.T) {
	t.Parallel()
	p := start(t, "ignore-term")
	// The child ignores SIGTERM once it has said so.
	require.Eventually(t, func() bool { return sidecarproc.Tail(p.Log(), 1) == "  ignoring SIGTERM" },
		30*time.Second, 20*time.Millisecond)
	err := p.Stop(200 * time.Millisecond)
	require.ErrorContains(t, err, "did not stop within 200ms of SIGTERM: killed")
	require.False(t, p.Running())
}

func TestWaitHTTPReportsAnExitWithTheLog(t *testing.T) {
	t.Parallel()
	p := start(t, "fail")
	err := p.WaitHTTP(t.Context(), "http://127.0.0.1:1/", 30*time.Second)
	require.ErrorContains(t, err, "fail exited while starting (exit status 3)")
	require.ErrorContains(t, err, "something went wrong")
	<-p.Exited()
	require.Error(t, p.Err())
	require.NoError(t, p.Kill(), "killing an exited process is a no-op")
}
