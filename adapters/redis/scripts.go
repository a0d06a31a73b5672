package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// scriptSources is the source of every Lua script the adapter runs, for WarmUp to load.
var scriptSources []string

// newScript is goredis.NewScript for a script WarmUp loads at start: every script of the package
// is made by it.
func newScript(src string) *goredis.Script {
	scriptSources = append(scriptSources, src)
	return goredis.NewScript(src)
}

// setUpCall marks a context whose calls set connections up on purpose (WarmUp's): callBound
// leaves them to the context's own deadline.
type setUpCall struct{}

// WarmUp readies c for its calls before the first one comes. It opens and handshakes every
// connection of each node's pool: a call that opens its own connection spends a round trip on
// the handshake (HELLO) inside its timeout, so on a Redis whose round trip exceeds half of it
// every such call failed. It loads every Lua script the adapter runs: a script's first call
// otherwise spends two round trips, EVALSHA answered NOSCRIPT then EVAL. A script Redis has
// lost since (a restart) is sent again by the call that finds it missing, and a connection
// lost since is opened again by the call that needs it, within its timeout.
//
// Its calls are bounded by ctx alone, not each by a call's timeout: on each node it takes up to
// five round trips (the scripts' load on one connection, its handshake probing for maintenance
// notifications, then the rest of the pool's handshakes and calls at once). On a Cluster it
// warms every node the client knows, replicas too (one may be promoted). It returns the first
// failure: a client half warmed works as a cold one does.
func WarmUp(ctx context.Context, c goredis.UniversalClient) error {
	ctx = context.WithValue(ctx, setUpCall{}, true)
	var err error
	switch c := c.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachShard(ctx, warmUpNode)
	case *goredis.Client:
		err = warmUpNode(ctx, c)
	}
	if err != nil {
		return unavailable("warm up", err)
	}
	return nil
}

// warmUpNode loads the scripts on one connection, then holds all of node's pool at once, each
// connection answering one call, and gives them back to the pool, open. One connection first:
// the client's first handshakes probe for maintenance notifications, and go-redis does not guard
// that probe for connections set up through separate Conns at once.
func warmUpNode(ctx context.Context, node *goredis.Client) error {
	if err := loadScripts(ctx, node); err != nil {
		return err
	}
	conns := make([]*goredis.Conn, node.Options().PoolSize)
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i := range conns {
		conns[i] = node.Conn()
		wg.Go(func() { errs[i] = conns[i].Ping(ctx).Err() })
	}
	wg.Wait()
	for _, conn := range conns {
		_ = conn.Close()
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// loadScripts loads every script into node in one round trip.
func loadScripts(ctx context.Context, node *goredis.Client) error {
	_, err := node.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, src := range scriptSources {
			p.ScriptLoad(ctx, src)
		}
		return nil
	})
	return err
}
