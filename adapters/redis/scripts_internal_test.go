package redis

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

// Every script of the package is made by newScript, so WarmUp loads it: a goredis.NewScript
// call elsewhere would be a script whose first call pays EVALSHA, NOSCRIPT, then EVAL.
func TestScripts_EveryScriptIsMadeByNewScript(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if ok && fn.Name.Name == "newScript" {
				return false
			}
			sel, ok := n.(*ast.SelectorExpr)
			if ok && sel.Sel.Name == "NewScript" {
				t.Errorf("%s: a script made by goredis.NewScript, not newScript", fset.Position(sel.Pos()))
			}
			return true
		})
	}
}

// WarmUp loads every script into a Redis that never ran one; one that Redis lost since (it
// keeps nothing across a restart here) is sent again by the call that finds it missing.
func TestWarmUp_LoadsEveryScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, err := NewClient(testenv.StartPrivateRedis(t).URL, Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout, PoolSize: 2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	hashes := make([]string, len(scriptSources))
	for i, src := range scriptSources {
		hashes[i] = goredis.NewScript(src).Hash()
	}
	require.NotEmpty(t, hashes)

	require.NoError(t, WarmUp(ctx, client))
	loaded, err := client.ScriptExists(ctx, hashes...).Result()
	require.NoError(t, err)
	assert.NotContains(t, loaded, false, "every script is in the server's cache")

	require.NoError(t, client.ScriptFlush(ctx).Err())
	_, err = NewIdempotencyStore(client, "rg-test-idem:").Begin(ctx, ports.IdempotencyKey{Scope: "user", Key: "k"}, "fp", time.Minute, time.Minute)
	assert.NoError(t, err, "a script Redis lost since")
}

// On a Redis Cluster, WarmUp loads every script on every node, a command's node being its key's.
// Not parallel: it empties the shared cluster's script caches first, so that what it finds there
// is WarmUp's doing, while no other test runs.
func TestWarmUp_LoadsEveryScriptOnEveryClusterNode(t *testing.T) {
	ctx := context.Background()
	client, err := NewClient(testenv.RedisCluster(t), Options{
		DialTimeout: testenv.DependencyTimeout, ReadTimeout: testenv.DependencyTimeout, WriteTimeout: testenv.DependencyTimeout, PoolSize: 2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	cluster := client.(*goredis.ClusterClient)
	require.NoError(t, cluster.ForEachShard(ctx, func(ctx context.Context, node *goredis.Client) error {
		return node.ScriptFlush(ctx).Err()
	}))
	hashes := make([]string, len(scriptSources))
	for i, src := range scriptSources {
		hashes[i] = goredis.NewScript(src).Hash()
	}

	require.NoError(t, WarmUp(ctx, client))
	var nodes atomic.Int32 // ForEachShard calls its function on every node at once
	require.NoError(t, cluster.ForEachShard(ctx, func(ctx context.Context, node *goredis.Client) error {
		loaded, err := node.ScriptExists(ctx, hashes...).Result()
		if err == nil {
			assert.NotContains(t, loaded, false, "every script is in the cache of %s", node.Options().Addr)
		}
		nodes.Add(1)
		return err
	}))
	assert.EqualValues(t, 3, nodes.Load(), "the cluster's nodes")
}
