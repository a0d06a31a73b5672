package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// S3 is a private S3-compatible server (versitygw on a posix directory) with one bucket.
type S3 struct {
	Endpoint  string // http://127.0.0.1:port
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
}

// Bounds on getting versitygw: its first build takes about 75 s on a quiet machine, and a
// started server answers HTTP within a second or two.
const (
	versitygwBuildLimit = 10 * time.Minute
	versitygwReadyLimit = 30 * time.Second
)

// versitygwBinary builds or finds versitygw once per test process through scripts/versitygw.sh,
// so `go test` alone works on a fresh machine.
var versitygwBinary = sync.OnceValues(func() (string, error) {
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "versitygw.sh")
	ctx, cancel := context.WithTimeout(context.Background(), versitygwBuildLimit)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", fmt.Errorf("scripts/versitygw.sh did not finish within %v", versitygwBuildLimit)
	}
	if err != nil {
		return "", fmt.Errorf("scripts/versitygw.sh: %w: %s", err, strings.Join(strings.Fields(stderr.String()), " "))
	}
	return strings.TrimSpace(string(out)), nil
})

// Versitygw starts versitygw on 127.0.0.1 on a free port, serving a fresh directory with one
// bucket, and stops it when the test ends. It skips the test when versitygw cannot be built or
// started, and fails it when CI=true.
func Versitygw(t testing.TB) S3 {
	t.Helper()
	bin, err := versitygwBinary()
	if err != nil {
		Unreachable(t, "versitygw", err)
	}
	root := t.TempDir()
	s3 := S3{Region: "us-east-1", Bucket: "rushgate", AccessKey: "rushgate-test", SecretKey: "rushgate-test-secret-" + randomHex(8)}
	if err := os.Mkdir(filepath.Join(root, s3.Bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	s3.Endpoint = "http://" + addr
	cmd := exec.Command(bin, "--access", s3.AccessKey, "--secret", s3.SecretKey, "--region", s3.Region,
		"--port", addr, "posix", root)
	cmd.Stdout = LogWriter(t)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		Unreachable(t, "versitygw", err)
	}
	// Closed when the process has exited, its status in exitErr: both the readiness wait and the
	// cleanup wait on it.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	if err := waitForHTTP(s3.Endpoint, exited, &exitErr, versitygwReadyLimit); err != nil {
		Unreachable(t, "versitygw", err) // its output is in the test's log
	}
	return s3
}

// waitForHTTP waits until endpoint answers an HTTP request (any status: an unsigned request is
// refused once the gateway serves), the process exits, or limit passes. Accepting connections
// is not enough: a gateway still starting can accept and not answer.
func waitForHTTP(endpoint string, exited <-chan struct{}, exitErr *error, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := client.Get(endpoint)
		if err == nil {
			_ = res.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited before serving: %w", *exitErr)
		case <-ctx.Done():
			return fmt.Errorf("versitygw did not answer HTTP on %s within %v", endpoint, limit)
		case <-tick.C:
		}
	}
}
