package localblob

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/rushgate/rushgate/ports"
)

// TestFileError_MarksAFileSystemOutOfSpaceOrQuotaUnavailable: a write refused for want of space
// (ENOSPC) or quota (EDQUOT) is errOutOfSpace and ports.ErrUnavailable, so it answers 503 and
// the log names the cause; other failures are neither. The e2e test fills a real tmpfs; a quota
// is not reachable there by a test running as root, which quotas do not bind.
func TestFileError_MarksAFileSystemOutOfSpaceOrQuotaUnavailable(t *testing.T) {
	for _, tc := range []struct {
		errno      syscall.Errno
		outOfSpace bool
	}{
		{syscall.ENOSPC, true},
		{syscall.EDQUOT, true},
		{syscall.EACCES, false},
		{syscall.EIO, false},
	} {
		err := fileError(&fs.PathError{Op: "write", Path: "/data/.incoming/upload-1", Err: tc.errno})
		if errors.Is(err, errOutOfSpace) != tc.outOfSpace || errors.Is(err, ports.ErrUnavailable) != tc.outOfSpace {
			t.Errorf("%v: %v, want out of space and unavailable: %v", tc.errno, err, tc.outOfSpace)
		}
		if !errors.Is(err, tc.errno) {
			t.Errorf("%v: %v does not keep the cause", tc.errno, err)
		}
	}
}
