package docs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// embeddingPrelude declares what the README's Embedding snippet names without making: the
// context, the database and Redis handles, and the join's ids. The snippet is its body.
const embeddingPrelude = `package snippet

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	appcrew "github.com/rushgate/rushgate/application/crew"
	"github.com/rushgate/rushgate/application/guard"
)

func snippet(ctx context.Context, db *gormdb.DB, rdb goredis.UniversalClient, id, user, key string) {
`

// TestReadme_EmbeddingSnippetCompiles builds the README's Embedding snippet as printed, inside
// a function declaring what it names, so that an embedder who pastes it gets a build: a
// constructor whose signature changed fails here first.
func TestReadme_EmbeddingSnippetCompiles(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Embedding\n")
	if !ok {
		t.Fatal("README has no Embedding section")
	}
	_, block, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatal("README's Embedding section has no ```go block")
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("README's Embedding ```go block is not closed")
	}
	// Inside the module, so that its imports resolve; a leading _ keeps ./... from seeing it.
	dir, err := os.MkdirTemp(".", "_embedding")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	source := embeddingPrelude + block + "\n\t_, _ = res, err\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "snippet.go"), []byte(source), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, "./"+filepath.Base(dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Embedding snippet does not build: %v\n%s\n--- snippet\n%s", err, out, block)
	}
}
