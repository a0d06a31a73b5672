package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// NoEviction is the one maxmemory-policy under which Redis never drops a key: at maxmemory it
// refuses writes instead, which rushgate answers 503 UNAVAILABLE with Retry-After.
const NoEviction = "noeviction"

// MemoryPolicy is what one Redis master does when its memory is full.
type MemoryPolicy struct {
	// Node is the master's host:port.
	Node string
	// Policy is its maxmemory-policy (noeviction, allkeys-lru, volatile-ttl …).
	Policy string
	// MaxMemory is its maxmemory in bytes; 0 is no limit of its own.
	MaxMemory int64
}

// Evicts reports a policy under which Redis drops keys to make room: under allkeys-* any key;
// under volatile-* the keys with a TTL, locks and idempotency records among them.
func (p MemoryPolicy) Evicts() bool { return p.Policy != NoEviction }

// MemoryPolicies reads maxmemory and maxmemory-policy (CONFIG GET maxmemory*, one round trip)
// from every master c writes to: the one of a single server or Sentinel, each of a Cluster,
// each named by its host:port. The
// policies read come back with an error naming each master that did not answer them: a managed
// Redis often disables or renames CONFIG, or an ACL denies it.
func MemoryPolicies(ctx context.Context, c goredis.UniversalClient) ([]MemoryPolicy, error) {
	var (
		mu       sync.Mutex
		policies []MemoryPolicy
		errs     []error
	)
	read := func(ctx context.Context, node *goredis.Client) error {
		p, err := memoryPolicy(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nodeName(node), err))
		} else {
			policies = append(policies, p)
		}
		return nil
	}
	switch c := c.(type) {
	case *goredis.ClusterClient:
		if err := c.ForEachMaster(ctx, read); err != nil {
			errs = append(errs, err)
		}
	case *goredis.Client:
		_ = read(ctx, c)
	default:
		errs = append(errs, fmt.Errorf("client type %T not supported", c))
	}
	if err := errors.Join(errs...); err != nil {
		return policies, unavailable("read maxmemory-policy", err)
	}
	return policies, nil
}

// nodeName names node in an error: its address, or the master's name behind sentinels.
func nodeName(node *goredis.Client) string {
	if addr := node.Options().Addr; addr != sentinelAddr {
		return addr
	}
	return "the sentinels' master"
}

// sentinelAddr is the address go-redis gives the client of a Sentinel-monitored master, which it
// finds through the sentinels: not a node's.
const sentinelAddr = "FailoverClient"

// memoryPolicy reads node's policy; a Sentinel's master names itself, by the address the
// connection reached (CLIENT INFO's laddr), in the same round trip.
func memoryPolicy(ctx context.Context, node *goredis.Client) (MemoryPolicy, error) {
	var (
		config *goredis.MapStringStringCmd
		client *goredis.ClientInfoCmd
	)
	// Each command's error is its own: a Redis too old for CLIENT INFO (6.2) still answers CONFIG.
	_, _ = node.Pipelined(ctx, func(p goredis.Pipeliner) error {
		config = p.ConfigGet(ctx, "maxmemory*")
		if node.Options().Addr == sentinelAddr {
			client = p.ClientInfo(ctx)
		}
		return nil
	})
	if err := config.Err(); err != nil {
		return MemoryPolicy{}, err
	}
	addr := nodeName(node)
	if client != nil && client.Err() == nil {
		addr = client.Val().LAddr
	}
	policy, ok := config.Val()["maxmemory-policy"]
	if !ok {
		return MemoryPolicy{}, errors.New("CONFIG GET answered no maxmemory-policy")
	}
	maxMemory, err := strconv.ParseInt(config.Val()["maxmemory"], 10, 64)
	if err != nil {
		return MemoryPolicy{}, fmt.Errorf("CONFIG GET answered maxmemory %q", config.Val()["maxmemory"])
	}
	return MemoryPolicy{Node: addr, Policy: policy, MaxMemory: maxMemory}, nil
}
