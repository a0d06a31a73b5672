package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
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

// versitygwBinary builds or finds versitygw once per test process through scripts/versitygw.sh,
// so `go test` alone works on a fresh machine (the first build takes about 75 s).
var versitygwBinary = sync.OnceValues(func() (string, error) {
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "versitygw.sh")
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/versitygw.sh: %w: %s", err, stderr.String())
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
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--access", s3.AccessKey, "--secret", s3.SecretKey, "--region", s3.Region,
		"--port", addr, "posix", root)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		Unreachable(t, "versitygw", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited //nolint:errcheck // killed: the exit status says only that
	})
	if err := waitForListener(addr, exited, 20*time.Second); err != nil {
		Unreachable(t, "versitygw", fmt.Errorf("%w\n%s", err, logs.String()))
	}
	return s3
}

// waitForListener waits until addr accepts connections, the process exits, or limit passes.
func waitForListener(addr string, exited <-chan error, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("versitygw exited before listening: %w", err)
		case <-ctx.Done():
			return errors.New("versitygw did not listen on " + addr + " in time")
		case <-tick.C:
		}
	}
}
