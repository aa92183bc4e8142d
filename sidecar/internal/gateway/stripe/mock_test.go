package stripe_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// StripeMockVersion is the stripe-mock the tests build and run.
const StripeMockVersion = "v0.203.0"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildSkip bool
)

// stripeMockBinary builds stripe-mock into <repo>/.cache/bin once (kept for
// later runs) and returns its path.
func stripeMockBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		bin := filepath.Join(root, ".cache", "bin")
		buildPath = filepath.Join(bin, "stripe-mock-"+StripeMockVersion)
		if _, err := os.Stat(buildPath); err == nil {
			return
		}
		if err := os.MkdirAll(bin, 0o755); err != nil {
			buildErr = err
			return
		}
		// Into a directory of its own, then renamed: parallel test runs
		// never see half a binary.
		tmp, err := os.MkdirTemp(bin, "stripe-mock-build-")
		if err != nil {
			buildErr = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("go", "install", "github.com/stripe/stripe-mock@"+StripeMockVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go install github.com/stripe/stripe-mock@%s: %w\n%s", StripeMockVersion, err, out)
			// The Go proxy refusing the module (not served here) is the one
			// reason to skip rather than fail.
			buildSkip = regexp.MustCompile(`(?i)(410 Gone|404 Not Found|not found: |proxy.*refused|GOPROXY=off|no such host|dial tcp)`).Match(out)
			return
		}
		buildErr = os.Rename(filepath.Join(tmp, "stripe-mock"), buildPath)
	})
	if buildErr != nil {
		if buildSkip {
			t.Skipf("stripe-mock cannot be built because the Go proxy refuses it: %v", buildErr)
		}
		t.Fatalf("stripe-mock cannot be built: %v", buildErr)
	}
	return buildPath
}

// startStripeMock starts stripe-mock on a free port, stopped when the test
// ends, and returns its URL.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMockBinary(t)
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok && !found {
				found = true
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("stripe-mock exited without listening")
		}
		return "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("stripe-mock did not listen within 60 s")
	}
	return ""
}

// recorded is one request a recorder saw.
type recorded struct {
	Method, Path string
	Header       http.Header
	Form         url.Values
}

// recorder is a real HTTP server in front of stripe-mock that records each
// request, so tests see the requests' shapes.
type recorder struct {
	URL  string
	mu   sync.Mutex
	reqs []recorded
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		if r.Method == http.MethodGet {
			form = r.URL.Query()
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Form: form})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL
	return rec
}

func (r *recorder) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

var bg = context.Background()
